package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
	"github.com/meshlab/meshlab/internal/testutil"
)

const backendCluster = "outbound|8080||backend.default.svc.cluster.local"

func backend(t *testing.T, name string) netip.AddrPort {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Seen-Host", r.Host)
		fmt.Fprintf(w, "%s %s", name, r.URL.RequestURI())
	}))
	t.Cleanup(s.Close)
	return netip.MustParseAddrPort(s.Listener.Addr().String())
}

// snapshotV builds the resources of the end-to-end test: an EDS cluster of the backends,
// an HTTP listener on 127.0.0.1:0 using RDS "8080", and the route "8080" to the cluster.
func snapshotV(t *testing.T, backends []netip.AddrPort, extra ...*listenerv3.Listener) map[resource.Type][]cachetypes.Resource {
	t.Helper()
	listeners := []cachetypes.Resource{httpListener(t, "web", "127.0.0.1", 0, "8080")}
	for _, l := range extra {
		listeners = append(listeners, l)
	}
	return map[resource.Type][]cachetypes.Resource{
		resource.ClusterType:  {edsCluster(backendCluster), blackHoleCluster()},
		resource.EndpointType: {assignment(backendCluster, backends...)},
		resource.ListenerType: listeners,
		resource.RouteType: {routeConfig("8080",
			vhostTo("backend.default.svc.cluster.local:8080", []string{"backend.default.svc.cluster.local", "backend", "backend:8080"}, backendCluster),
			vhostTo("allow_any", []string{"*"}, "BlackHoleCluster"),
		)},
	}
}

func TestEndToEndADSRoundRobinStatsConfigDumpAndNACK(t *testing.T) {
	b1, b2 := backend(t, "b1"), backend(t, "b2")
	x := startXDS(t)
	const node = "sidecar~127.0.0.1~web.default~default.svc.cluster.local"
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), testBootstrap(x.socket)), nil)
	// Nothing served yet: the cluster manager waits for CDS, as Envoy's does.
	eventually(t, "a CDS request", func() bool { return len(x.requests()) > 0 })
	if code, body := adminGet(t, srv, "/ready"); code != http.StatusServiceUnavailable || body != "PRE_INITIALIZING\n" {
		t.Errorf("/ready before any config = %d %q, want 503 PRE_INITIALIZING", code, body)
	}
	for _, r := range x.requests() {
		if r.TypeURL == xdsclient.ListenerType {
			t.Errorf("LDS requested before the cluster manager initialized: %+v", r)
		}
	}
	x.set(node, "v1", snapshotV(t, []netip.AddrPort{b1, b2}))
	eventually(t, "/ready to say LIVE", func() bool {
		code, body := adminGet(t, srv, "/ready")
		return code == http.StatusOK && body == "LIVE\n"
	})
	addr, ok := srv.ListenerAddr("web")
	if !ok {
		t.Fatal("listener web is not bound")
	}
	url := "http://" + addr.String() + "/hello?x=1"
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)

	counts := map[string]int{}
	for i := 0; i < 100; i++ {
		code, body, h := get(t, client, url, "backend:8080")
		if code != http.StatusOK {
			t.Fatalf("request %d: status %d body %q", i, code, body)
		}
		counts[h.Get("X-Backend")]++
		if i == 0 {
			if h.Get("Server") != "envoy" {
				t.Errorf("server header = %q, want envoy", h.Get("Server"))
			}
			if h.Get("X-Envoy-Upstream-Service-Time") == "" {
				t.Error("x-envoy-upstream-service-time missing")
			}
			if len(h.Get("X-Seen-Request-Id")) != 36 {
				t.Errorf("upstream saw x-request-id %q, want a generated UUID", h.Get("X-Seen-Request-Id"))
			}
			if h.Get("X-Seen-Host") != "backend:8080" {
				t.Errorf("upstream saw host %q", h.Get("X-Seen-Host"))
			}
			if body != "b1 /hello?x=1" && body != "b2 /hello?x=1" {
				t.Errorf("body = %q", body)
			}
		}
	}
	if counts["b1"] != 50 || counts["b2"] != 50 {
		t.Errorf("round robin split = %v, want 50/50", counts)
	}

	st := srv.StatsStore()
	for name, want := range map[string]int64{
		"cluster." + backendCluster + ".upstream_rq_total":     100,
		"cluster." + backendCluster + ".upstream_rq_200":       100,
		"cluster." + backendCluster + ".upstream_rq_2xx":       100,
		"cluster." + backendCluster + ".upstream_rq_completed": 100,
		"cluster." + backendCluster + ".membership_total":      2,
		"cluster." + backendCluster + ".membership_healthy":    2,
		"http.outbound_web.downstream_rq_total":                100,
		"http.outbound_web.downstream_rq_2xx":                  100,
		"cluster_manager.cds.update_success":                   1,
		"listener_manager.lds.update_success":                  1,
		"listener_manager.total_listeners_active":              1,
		"cluster_manager.active_clusters":                      3,
	} {
		// The downstream stats are counted when the stream completes, which can be just
		// after the client has read the last byte (as in Envoy): wait briefly for them.
		if got := waitValue(st, name, want); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	// Envoy names listener stats after the configured address, so port 0 stays 0.
	if got := st.Value("listener.127.0.0.1_0.downstream_cx_total"); got < 1 {
		t.Errorf("listener downstream_cx_total = %d, want >= 1", got)
	}

	// Unknown host -> allow_any -> BlackHoleCluster (no endpoints): 503 no healthy upstream.
	code, body, _ := get(t, client, url, "elsewhere.example")
	if code != http.StatusServiceUnavailable || body != "no healthy upstream" {
		t.Errorf("blackhole: %d %q, want 503 no healthy upstream", code, body)
	}

	// /stats text and prometheus.
	_, text := adminGet(t, srv, "/stats?filter=^cluster_manager")
	if !strings.Contains(text, "cluster_manager.cds.update_success: 1\n") || strings.Contains(text, "listener_manager") {
		t.Errorf("/stats?filter: %s", text)
	}
	_, prom := adminGet(t, srv, "/stats/prometheus")
	wantProm := `envoy_cluster_upstream_rq_total{envoy_cluster_name="` + backendCluster + `"} 100`
	if !strings.Contains(prom, wantProm) || !strings.Contains(prom, "# TYPE envoy_cluster_upstream_rq_total counter") {
		t.Errorf("/stats/prometheus lacks %s:\n%s", wantProm, prom)
	}

	// Histograms, as Envoy renders them: quantile summaries in /stats, Prometheus
	// histograms with Envoy's default buckets, and the JSON "histograms" element.
	for _, want := range []string{
		`envoy_cluster_upstream_rq_time_count{envoy_cluster_name="` + backendCluster + `"} 100`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="` + backendCluster + `",le="3600000"} 100`,
		// 100 or 101: the blackholed request may complete just after its reply is read.
		`envoy_http_downstream_rq_time_count{envoy_http_conn_manager_prefix="outbound_web"} 10`,
		"# TYPE envoy_cluster_upstream_cx_connect_ms histogram",
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("/stats/prometheus lacks %s", want)
		}
	}
	_, text = adminGet(t, srv, "/stats?filter=outbound.*upstream_rq_time$")
	if !strings.HasPrefix(text, "cluster."+backendCluster+".upstream_rq_time: P0(nan,") || !strings.Contains(text, " P99.9(nan,") {
		t.Errorf("/stats histogram line: %q", text)
	}
	_, js := adminGet(t, srv, "/stats?format=json&filter=downstream_rq_time")
	if !strings.Contains(js, `"supported_quantiles": [`) || !strings.Contains(js, `"name": "http.outbound_web.downstream_rq_time"`) {
		t.Errorf("/stats?format=json histograms:\n%s", js)
	}

	_, cj := adminGet(t, srv, "/clusters?format=json")
	for _, want := range []string{regexp.QuoteMeta(`"name": "`+backendCluster+`",`) + `\s*"added_via_api": true`, `"eds_health_status": "HEALTHY"`,
		`"value": "50",\s*"name": "rq_total"`, `"type": "GAUGE",\s*("value": "\d+",\s*)?"name": "cx_active"`} {
		if !regexp.MustCompile(want).MatchString(cj) {
			t.Errorf("/clusters?format=json lacks %s:\n%s", want, cj)
		}
	}

	// /config_dump carries the dynamic resources with their versions.
	code, dump := adminGet(t, srv, "/config_dump")
	if code != http.StatusOK {
		t.Fatalf("/config_dump: %d", code)
	}
	for _, want := range []string{
		`"@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump"`,
		`"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump"`,
		`"dynamic_active_clusters"`,
		`"name": "` + backendCluster + `"`,
		`"version_info": "v1"`,
		`"dynamic_listeners"`,
		`"dynamic_route_configs"`,
		`"static_clusters"`,
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("/config_dump lacks %s", want)
		}
	}
	if strings.Index(dump, "ClustersConfigDump") > strings.Index(dump, "ListenersConfigDump") ||
		strings.Index(dump, "ListenersConfigDump") > strings.Index(dump, "RoutesConfigDump") {
		t.Error("/config_dump is not in Envoy's order (bootstrap, clusters, listeners, routes)")
	}

	_, eds := adminGet(t, srv, "/config_dump?include_eds")
	if !strings.Contains(eds, "envoy.admin.v3.EndpointsConfigDump") || strings.Contains(dump, "envoy.admin.v3.EndpointsConfigDump") {
		t.Error("EndpointsConfigDump must appear only with ?include_eds")
	}

	for _, typ := range []string{xdsclient.ClusterType, xdsclient.EndpointType, xdsclient.ListenerType, xdsclient.RouteType} {
		if !x.acked(typ, "v1") {
			t.Errorf("no ACK of %s v1; requests: %+v", typ, x.requests())
		}
	}
	reqs := x.requests()
	if !reqs[0].HasNode || reqs[0].TypeURL != xdsclient.ClusterType {
		t.Errorf("first request = %+v, want CDS with node", reqs[0])
	}

	// v2 adds a listener with an unsupported filter: that listener is refused, the LDS
	// update is NACKed with Envoy's wording, and v1 keeps serving.
	bad := &listenerv3.Listener{Name: "redis", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{redisFilter(t)}}}}
	x.set(node, "v2", snapshotV(t, []netip.AddrPort{b1, b2}, bad))
	eventually(t, "a NACK of LDS v2", func() bool { return x.nack(xdsclient.ListenerType) != "" })
	wantErr := "Error adding/updating listener(s) redis: listener 'redis': filter_chains[0].filters[0].typed_config: unsupported type envoy.extensions.filters.network.redis_proxy.v3.RedisProxy\n"
	if got := x.nack(xdsclient.ListenerType); got != wantErr {
		t.Errorf("NACK message = %q, want %q", got, wantErr)
	}
	for _, r := range x.requests() {
		if r.TypeURL == xdsclient.ListenerType && r.Error != "" && r.Version != "v1" {
			t.Errorf("NACK carries version %q, want the last good v1", r.Version)
		}
	}
	// go-control-plane's snapshot cache answers a NACK (which carries the last good
	// version, as Envoy's does) with the same snapshot again, so there may be several.
	if got := st.Value("listener_manager.lds.update_rejected"); got < 1 {
		t.Errorf("lds.update_rejected = %d, want >= 1", got)
	}
	if code, _, _ := get(t, client, url, "backend"); code != http.StatusOK {
		t.Errorf("after NACK the old config must keep serving, got %d", code)
	}
	_, dump = adminGet(t, srv, "/config_dump?resource=dynamic_listeners")
	// The refused listener shows only under error_state; web is unchanged, so the
	// response applied nothing and everything stays at v1.
	if strings.Contains(dump, `"version_info": "v2"`) || !strings.Contains(dump, `"version_info": "v1"`) {
		t.Errorf("config_dump after NACK must show listener v1 only:\n%s", dump)
	}
	if dl := dynamicListener(t, srv, "redis"); dl == nil || dl.GetActiveState() != nil || dl.GetErrorState() == nil {
		t.Errorf("config_dump after NACK: redis = %v, want an error_state only", dl)
	}
	eventually(t, "ACK of CDS v2", func() bool { return x.acked(xdsclient.ClusterType, "v2") })

	// v3 fixes it and drops b2: EDS update shrinks the cluster.
	x.set(node, "v3", snapshotV(t, []netip.AddrPort{b1}))
	eventually(t, "ACK of LDS v3", func() bool { return x.acked(xdsclient.ListenerType, "v3") })
	eventually(t, "EDS v3 applied", func() bool {
		return st.Value("cluster."+backendCluster+".membership_total") == 1
	})
	for i := 0; i < 4; i++ {
		if _, _, h := get(t, client, url, "backend"); h.Get("X-Backend") != "b1" {
			t.Errorf("after EDS v3 request went to %q", h.Get("X-Backend"))
		}
	}
}

func TestUpstreamConnectFailureIs503UF(t *testing.T) {
	dead := testutil.RefusingAddr(t) // a port nothing listens on
	x := startXDS(t)
	const node = "sidecar~127.0.0.1~web.default~default.svc.cluster.local"
	x.set(node, "v1", snapshotV(t, []netip.AddrPort{dead}))
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), testBootstrap(x.socket)), nil)
	eventually(t, "LIVE", func() bool { code, _ := adminGet(t, srv, "/ready"); return code == 200 })
	addr, _ := srv.ListenerAddr("web")
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	code, body, _ := get(t, client, "http://"+addr.String()+"/", "backend")
	want := "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
	if code != http.StatusServiceUnavailable || body != want {
		t.Errorf("got %d %q, want 503 %q", code, body, want)
	}
	st := srv.StatsStore()
	if got := st.Value("cluster." + backendCluster + ".upstream_cx_connect_fail"); got != 1 {
		t.Errorf("upstream_cx_connect_fail = %d, want 1", got)
	}
	if got := st.Value("cluster." + backendCluster + ".upstream_rq_503"); got != 1 {
		t.Errorf("upstream_rq_503 = %d, want 1", got)
	}
}

// waitValue polls a stat for up to two seconds until it equals want, and returns its last
// value.
func waitValue(st *stats.Store, name string, want int64) int64 {
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := st.Value(name)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}
