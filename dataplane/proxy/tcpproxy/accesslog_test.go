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

// TestAccessLogHasFilterChainSNIAndUpstreamLocalAddress pins the connection fields Envoy's
// tcp_proxy logs: the filter chain name and SNI the listener matched, and the proxy's end
// of the upstream connection (the address the upstream saw as its peer).
func TestAccessLogHasFilterChainSNIAndUpstreamLocalAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		peers <- c.RemoteAddr().String()
		_, _ = c.Write([]byte("hi"))
		c.Close()
	}()
	t.Cleanup(func() { ln.Close(); <-done })

	store := stats.NewStore()
	cm := cluster.NewManager(store)
	t.Cleanup(cm.Close)
	cm.AddStatic([]*cluster.Config{staticCluster(t, "up", ln.Addr().String())})
	logPath := filepath.Join(t.TempDir(), "tcp.log")
	fl, _ := anypb.New(&filev3.FileAccessLog{Path: logPath, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
			InlineString: "%FILTER_CHAIN_NAME% %REQUESTED_SERVER_NAME% %UPSTREAM_LOCAL_ADDRESS% %UPSTREAM_TRANSPORT_FAILURE_REASON%\n"}}}}}})
	a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "up"},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	c, s := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		Serve(context.Background(), cfg, Deps{Clusters: cm, Stats: store, Logger: testutil.Logger(t)}, s,
			Downstream{Local: netip.MustParseAddrPort("10.0.0.1:9000"), FilterChainName: "0.0.0.0_9000", ServerName: "outbound_.9000_._.db.default.svc.cluster.local"})
		s.Close()
	}()
	_, _ = io.ReadAll(c)
	c.Close()
	<-served
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "0.0.0.0_9000 outbound_.9000_._.db.default.svc.cluster.local " + <-peers + " -"
	if got := strings.TrimSpace(string(data)); got != want {
		t.Errorf("access log line\n got %q\nwant %q", got, want)
	}
}
