package tcpproxy

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestNetworkFilterDenialIsLoggedByTCPProxy pins the order of Envoy's tcp_proxy and the
// network RBAC filter ahead of it: tcp_proxy counts the connection and connects upstream
// at once, holding downstream reads until connected; RBAC decides on the first read, so
// a denied connection has reached the upstream host, copies nothing, and tcp_proxy's
// access log entry (written when the connection closes) names the cluster and host with
// the filter's %CONNECTION_TERMINATION_DETAILS%, no bytes and no response flag. When the
// upstream connection fails, tcp_proxy closes the connection before RBAC decides.
func TestNetworkFilterDenialIsLoggedByTCPProxy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow       bool
		upstreamUp  bool
		wantLog     string // with HOST for the upstream address
		wantDown    string // what the downstream reads
		wantUpBytes string // what the upstream reads
		wantAsked   bool   // whether the filter was asked
	}{
		{name: "a denied connection reaches the upstream host and is logged with the filter's details",
			upstreamUp: true, wantAsked: true,
			wantLog: "rbac_access_denied_matched_policy[none] up HOST 0 0 -", wantDown: "", wantUpBytes: ""},
		{name: "an allowed connection is proxied and logged without details",
			allow: true, upstreamUp: true, wantAsked: true,
			wantLog: "- up HOST 4 5 -", wantDown: "hello", wantUpBytes: "ping"},
		{name: "a failed upstream connection closes before the filter decides",
			wantLog: "- up HOST 0 0 UF", wantDown: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			upAddr := ln.Addr().String()
			got := make(chan string, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := c.Write([]byte("hello")); err != nil {
					got <- ""
					return
				}
				b, _ := io.ReadAll(c)
				got <- string(b)
			}()
			t.Cleanup(func() { _ = ln.Close(); <-done })
			if !tc.upstreamUp {
				upAddr = testutil.RefusingAddr(t).String() // connection refused
			}

			store := stats.NewStore()
			cm := cluster.NewManager(store)
			t.Cleanup(cm.Close)
			cm.AddStatic([]*cluster.Config{staticCluster(t, "up", upAddr)})
			logPath := filepath.Join(t.TempDir(), "tcp.log")
			fl, _ := anypb.New(&filev3.FileAccessLog{Path: logPath, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
					InlineString: "%CONNECTION_TERMINATION_DETAILS% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %BYTES_RECEIVED% %BYTES_SENT% %RESPONSE_FLAGS%\n"}}}}}})
			a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "up"},
				AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Compile(a)
			if err != nil {
				t.Fatal(err)
			}
			asked := false
			c, s := net.Pipe()
			served := make(chan struct{})
			go func() {
				defer close(served)
				Serve(context.Background(), cfg, Deps{Clusters: cm, Stats: store, Logger: testutil.Logger(t)}, s,
					Downstream{Local: netip.MustParseAddrPort("10.0.0.1:9000"), Authorize: func() (bool, string) {
						asked = true
						if tc.allow {
							return true, ""
						}
						return false, "rbac_access_denied_matched_policy[none]"
					}})
				_ = s.Close()
			}()
			// Client first, as the first read is what Envoy's RBAC decides on.
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				_, _ = c.Write([]byte("ping")) // returns once the proxy read it, or c closed
			}()
			var down []byte
			if tc.allow {
				down = make([]byte, 5)
				_, _ = io.ReadFull(c, down)
				<-wrote
				_ = c.Close()
			} else {
				down, _ = io.ReadAll(c)
			}
			<-served
			_ = c.Close()
			<-wrote
			if string(down) != tc.wantDown {
				t.Errorf("downstream read %q, want %q", down, tc.wantDown)
			}
			if asked != tc.wantAsked {
				t.Errorf("filter asked = %v, want %v", asked, tc.wantAsked)
			}
			if tc.upstreamUp {
				if up := <-got; up != tc.wantUpBytes {
					t.Errorf("upstream read %q, want %q", up, tc.wantUpBytes)
				}
			}
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.wantLog, "HOST", upAddr)
			if line := strings.TrimSpace(string(data)); line != want {
				t.Errorf("access log line\n got %q\nwant %q", line, want)
			}
			if n := store.Value("tcp.t.downstream_cx_total"); n != 1 {
				t.Errorf("tcp.t.downstream_cx_total = %d, want 1 (tcp_proxy counts every connection of its chain)", n)
			}
		})
	}
}
