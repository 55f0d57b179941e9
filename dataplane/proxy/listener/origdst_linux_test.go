package listener

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

func directHCM(t *testing.T, prefix, body string) []*listenerv3.Filter {
	t.Helper()
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: prefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
					Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
				}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
	}
	return []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)}}}
}

// TestOriginalDstHandoffInNamespace captures a connection with a real iptables REDIRECT
// inside a throwaway namespace and checks that virtualOutbound reads SO_ORIGINAL_DST and
// hands it to the bind_to_port=false listener of the original destination.
func TestOriginalDstHandoffInNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	ns := "ml-" + testutil.UniqueName(t) + "-pod"
	if err := netns.Create(ns); err != nil {
		t.Fatalf("create netns: %v", err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			t.Errorf("delete netns: %v", err)
		}
	})
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.2", "--dport", "9999", "-j", "REDIRECT", "--to-ports", "15001"},
		{"iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.3", "--dport", "7777", "-j", "REDIRECT", "--to-ports", "15001"},
	} {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	store := stats.NewStore()
	cm := cluster.NewManager(store)
	m := NewManager(Deps{Clusters: cm, Routes: httpconn.NewRouteStore(), Stats: store, Logger: testutil.Logger(t)})
	t.Cleanup(m.Close)
	outbound, err := Compile(&listenerv3.Listener{
		Name: "virtualOutbound", Address: addr("0.0.0.0", 15001), UseOriginalDst: wrapperspb.Bool(true),
		FilterChains: []*listenerv3.FilterChain{{Name: "catchall", Filters: directHCM(t, "catchall", "kept by virtualOutbound")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	target, err := Compile(&listenerv3.Listener{
		Name: "0.0.0.0_9999", Address: addr("0.0.0.0", 9999), BindToPort: wrapperspb.Bool(false),
		FilterChains: []*listenerv3.FilterChain{{Filters: directHCM(t, "outbound_0.0.0.0_9999", "handed off")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(ns, func() error { return m.ApplyLDS([]*Config{outbound, target}) }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dst, want string }{
		{"127.0.0.2:9999", "handed off"},
		{"127.0.0.3:7777", "kept by virtualOutbound"},
	} {
		conn, err := netns.DialContext(context.Background(), ns, "tcp", tc.dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if string(body) != tc.want {
			t.Errorf("%s: body %q, want %q", tc.dst, body, tc.want)
		}
	}
	if got := store.Value("listener.0.0.0.0_9999.downstream_cx_total"); got != 1 {
		t.Errorf("listener.0.0.0.0_9999.downstream_cx_total = %d, want 1", got)
	}
	if got := store.Value("listener.0.0.0.0_15001.downstream_cx_total"); got != 1 {
		t.Errorf("listener.0.0.0.0_15001.downstream_cx_total = %d, want 1", got)
	}
}
