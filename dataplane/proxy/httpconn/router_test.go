package httpconn

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveHCM runs ServeConn for every connection to a 127.0.0.1 listener until the test ends.
func serveHCM(tb testing.TB, cfg *Config, deps Deps) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				ServeConn(ctx, cfg, deps, c, Downstream{})
			}()
		}
	}()
	tb.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func staticCluster(tb testing.TB, name string, hosts ...string) *cluster.Config {
	tb.Helper()
	var lbs []*endpointv3.LbEndpoint
	for _, h := range hosts {
		ap := netip.MustParseAddrPort(h)
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
			}}},
		}}})
	}
	cfg, err := cluster.Compile(&clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout: durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func TestRouterLocalRepliesAndHeaders(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "upstream")
		w.Header().Set("X-Got-Proto", r.Header.Get("X-Forwarded-Proto"))
		w.Header().Set("X-Got-Rid", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Got-Timeout", r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
		w.WriteHeader(201)
	}))
	t.Cleanup(fast.Close)

	store := stats.NewStore()
	cm := cluster.NewManager(store)
	cm.AddStatic([]*cluster.Config{
		staticCluster(t, "slow", slow.Listener.Addr().String()),
		staticCluster(t, "fast", fast.Listener.Addr().String()),
		staticCluster(t, "empty"),
	})
	t.Cleanup(cm.Close)
	rc := &routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/slow"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "slow"}, Timeout: durationpb.New(50 * time.Millisecond)}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/empty"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "empty"}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/missing"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "nope"}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/direct"}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 418, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "teapot"}}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/fast"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "fast"}}}},
		},
	}}}
	table, err := CompileRoutes(rc)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHCM(t, &Config{StatPrefix: "test", Inline: table, ServerName: "envoy"},
		Deps{Routes: NewRouteStore(), Clusters: cm, Stats: store, Logger: testutil.Logger(t)})
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)

	for _, tc := range []struct {
		name, path string
		code       int
		body       string
	}{
		{"no route is 404 NR with an empty body", "/nothing", 404, ""},
		{"no healthy upstream is 503 UH", "/empty", 503, BodyNoHealthyUpstream},
		{"unknown cluster is 503 NC", "/missing", 503, ""},
		{"direct_response", "/direct", 418, "teapot"},
		{"route timeout is 504 UT", "/slow", 504, BodyTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Get("http://" + addr + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || string(body) != tc.body {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.code, tc.body)
			}
			if resp.Header.Get("Server") != "envoy" {
				t.Errorf("server = %q, want envoy", resp.Header.Get("Server"))
			}
		})
	}
	resp, err := client.Get("http://" + addr + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 201 || h.Get("Server") != "envoy" || h.Get("X-Got-Proto") != "http" ||
		len(h.Get("X-Got-Rid")) != 36 || h.Get("X-Got-Timeout") != "15000" || h.Get("X-Envoy-Upstream-Service-Time") == "" {
		t.Errorf("forwarded response: %d %v", resp.StatusCode, h)
	}
	for name, want := range map[string]int64{
		"http.test.downstream_rq_total":          6,
		"http.test.downstream_rq_4xx":            2,
		"http.test.downstream_rq_5xx":            3,
		"http.test.downstream_rq_2xx":            1,
		"http.test.no_route":                     1,
		"cluster.slow.upstream_rq_timeout":       1,
		"cluster.slow.upstream_rq_504":           1,
		"cluster.fast.upstream_rq_201":           1,
		"cluster.empty.upstream_cx_none_healthy": 1,
	} {
		if got := store.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}
