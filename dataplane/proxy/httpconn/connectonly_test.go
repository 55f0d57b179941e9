package httpconn

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// connectRoute is istiod's connect_terminate route: connect_matcher, terminated by the
// route's CONNECT upgrade with connect_config.
func connectRoute(cluster string) *routev3.Route {
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
			UpgradeConfigs: []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "CONNECT",
				ConnectConfig: &routev3.RouteAction_UpgradeConfig_ConnectConfig{}}},
		}},
	}
}

// Only an HCM whose every route is a CONNECT one, with CONNECT upgraded and allowed on
// HTTP/2 (istiod's connect_terminate), goes to the proxy's own CONNECT server.
func TestConnectOnlyHCMChoosesTheConnectServer(t *testing.T) {
	hcm := func(allow bool, routes ...*routev3.Route) *Config { return connectHCM(t, allow, routes...) }
	if !hcm(true, connectRoute("main_internal")).connectOnly() {
		t.Error("istiod's connect_terminate HCM is not served by the CONNECT server")
	}
	if hcm(false, connectRoute("main_internal")).connectOnly() {
		t.Error("an HCM without allow_connect is served by the CONNECT server")
	}
	if hcm(true, connectRoute("main_internal"), routeTo(prefix("/"), to("h2"))).connectOnly() {
		t.Error("an HCM with a non-CONNECT route is served by the CONNECT server")
	}
	if compileTestHCM(t, t.TempDir()+"/log", routeTo(prefix("/"), to("h2"))).connectOnly() {
		t.Error("a plain HCM is served by the CONNECT server")
	}
}

// connectHCM compiles istiod's connect_terminate HCM shape with routes.
func connectHCM(t *testing.T, allow bool, routes ...*routev3.Route) *Config {
	t.Helper()
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "connect_terminate",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "default",
			VirtualHosts: []*routev3.VirtualHost{{Name: "default", Domains: []string{"*"}, Routes: routes}}}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}},
		},
		Http2ProtocolOptions: &corev3.Http2ProtocolOptions{AllowConnect: allow},
		UpgradeConfigs:       []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}},
	}
	cfg, err := Compile(mustAny(t, h))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The drain on a connect-only HCM, as on x/net's server: GOAWAY 2^31-1 at once, the final
// GOAWAY with the last stream after the drain timeout, the tunnel in flight carrying its
// bytes to its end, then the connection closed.
func TestConnectOnlyDrainFinishesTheTunnel(t *testing.T) {
	echo := testutil.EchoServer(t)
	store := stats.NewStore()
	cm := cluster.NewManager(store)
	cm.AddStatic([]*cluster.Config{withCluster(t, &clusterv3.Cluster{Name: "tcp", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}, echo.String())})
	t.Cleanup(cm.Close)
	cfg := connectHCM(t, true, connectRoute("tcp"))
	cfg.DrainTimeout = 100 * time.Millisecond
	draining := make(chan struct{})
	deps := Deps{Routes: NewRouteStore(), Clusters: cm, Stats: store, Logger: testutil.Logger(t), Draining: draining}
	client, server := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		ServeConn(ctx, cfg, deps, server, Downstream{})
	}()
	t.Cleanup(func() { cancel(); client.Close(); <-served })
	_ = client.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(client, client)
	// The client's writes go from goroutines (net.Pipe blocks a write until the read
	// loop below reads), one at a time.
	var wmu sync.Mutex
	write := func(f func() error) {
		go func() {
			wmu.Lock()
			defer wmu.Unlock()
			_ = f()
		}()
	}
	write(func() error {
		_, _ = client.Write([]byte(http2.ClientPreface))
		_ = fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		_ = enc.WriteField(hpack.HeaderField{Name: ":method", Value: "CONNECT"})
		_ = enc.WriteField(hpack.HeaderField{Name: ":authority", Value: "10.0.0.1:80"})
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	})
	var goaways []uint32
	var echoed []byte
	status := ""
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break // the server closed the connection after the tunnel
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				write(fr.WriteSettingsAck)
			}
		case *http2.HeadersFrame:
			_, _ = dec.Write(f.HeaderBlockFragment())
			if status == "200" {
				close(draining)
			}
		case *http2.GoAwayFrame:
			goaways = append(goaways, f.LastStreamID)
			if len(goaways) == 2 {
				write(func() error { return fr.WriteData(1, true, []byte("in flight")) })
			}
		case *http2.DataFrame:
			echoed = append(echoed, f.Data()...)
		}
	}
	if status != "200" {
		t.Fatalf("CONNECT answered %q, want 200", status)
	}
	if len(goaways) != 2 || goaways[0] != 1<<31-1 || goaways[1] != 1 {
		t.Errorf("GOAWAY last stream ids = %v, want [2147483647 1]", goaways)
	}
	if string(echoed) != "in flight" {
		t.Errorf("tunnel carried %q after the GOAWAYs, want %q", echoed, "in flight")
	}
	if got := store.Value("http.connect_terminate.downstream_cx_drain_close"); got != 1 {
		t.Errorf("downstream_cx_drain_close = %d, want 1", got)
	}
}
