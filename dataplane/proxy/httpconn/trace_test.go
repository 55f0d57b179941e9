package httpconn

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
	"github.com/meshlab/meshlab/internal/testutil"
)

// reportedSpan is a span as a Zipkin collector reads it (v2 JSON).
type reportedSpan struct {
	TraceID, ID, ParentID, Kind, Name string
	Timestamp, Duration               int64
	LocalEndpoint                     struct{ ServiceName, IPv4 string }
	Tags                              map[string]string
	Shared                            bool
}

// collector is a Zipkin collector: every POST /api/v2/spans body's spans.
type collector struct {
	mu    sync.Mutex
	spans []reportedSpan
	hosts []string
}

func newCollector(tb testing.TB) (*collector, string) {
	tb.Helper()
	c := &collector{}
	addr := backend(tb, "", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v2/spans" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not a v2 JSON report", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var spans []reportedSpan
		if err := json.Unmarshal(b, &spans); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.spans = append(c.spans, spans...)
		c.hosts = append(c.hosts, r.Host)
		c.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	return c, addr
}

func (c *collector) wait(t *testing.T, n int) []reportedSpan {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := append([]reportedSpan(nil), c.spans...)
		c.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zipkinLab is an outbound HCM tracing every request to Istio's Zipkin provider, as
// istiod configures it (Telemetry with a zipkin extension provider).
func zipkinLab(tb testing.TB, spawn bool) (*lab, *collector, *stats.Store) {
	tb.Helper()
	return zipkinLabSampled(tb, spawn, 100)
}

// zipkinLabSampled is zipkinLab with random sampling at random percent; a negative
// random leaves the HCM without tracing.
func zipkinLabSampled(tb testing.TB, spawn bool, random float64) (*lab, *collector, *stats.Store) {
	tb.Helper()
	col, colAddr := newCollector(tb)
	up := echoHeadersTB(tb)
	l := &lab{store: stats.NewStore()}
	cm := cluster.NewManager(l.store)
	cm.AddStatic([]*cluster.Config{staticCluster(tb, "echo", up), staticCluster(tb, "outbound|9411||zipkin.istio-system.svc.cluster.local", colAddr)})
	tb.Cleanup(cm.Close)
	zc := &tracev3.ZipkinConfig{
		CollectorCluster: "outbound|9411||zipkin.istio-system.svc.cluster.local", CollectorEndpoint: "/api/v2/spans",
		CollectorHostname: "zipkin.istio-system.svc.cluster.local", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON,
		TraceId_128Bit: true, SharedSpanContext: wrapperspb.Bool(false),
	}
	r := routeTo(prefix("/"), to("echo"))
	r.Decorator = &routev3.Decorator{Operation: "echo.default.svc.cluster.local:80/*"}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "outbound_0.0.0.0_80",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{r}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(tb, &routerv3.Router{})}}},
		Tracing: &hcmv3.HttpConnectionManager_Tracing{
			ClientSampling: &typev3.Percent{Value: 100}, RandomSampling: &typev3.Percent{Value: random}, OverallSampling: &typev3.Percent{Value: 100},
			CustomTags: []*tracingv3.CustomTag{{Tag: "istio.canonical_service", Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: "sleep"}}}},
			Provider:   &tracev3.Tracing_Http{Name: tracing.ZipkinName, ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(tb, zc)}},
		},
	}
	if spawn {
		hcm.Tracing.SpawnUpstreamSpan = wrapperspb.Bool(true)
	}
	if random < 0 {
		hcm.Tracing = nil
	}
	cfg, err := Compile(mustAny(tb, hcm))
	if err != nil {
		tb.Fatal(err)
	}
	tr := tracing.New(tracing.Node{ID: "sidecar~10.0.0.5~sleep-1.default~default.svc.cluster.local", Cluster: "sleep.default", Address: netip.MustParseAddr("10.0.0.5")},
		cm, l.store, testutil.Logger(tb))
	l.addr = serveHCM(tb, cfg, Deps{Routes: NewRouteStore(), Clusters: cm, Stats: l.store, Logger: testutil.Logger(tb), Tracer: tr})
	l.client = &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(l.client.CloseIdleConnections)
	return l, col, l.store
}

func TestZipkinSpansAreReportedAndPropagatedAsB3(t *testing.T) {
	l, col, store := zipkinLab(t, false)
	const incomingTrace, incomingSpan = "463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312"
	var upstream []map[string]string
	for i := range 5 { // Envoy's reporter flushes at 5 spans
		hdr := []string{"User-Agent", "test"}
		if i == 0 {
			hdr = append(hdr, "X-B3-Traceid", incomingTrace, "X-B3-Spanid", incomingSpan, "X-B3-Sampled", "1")
		}
		_, body := l.get(t, "/items", hdr...)
		upstream = append(upstream, seen(t, body))
	}
	spans := col.wait(t, 5)
	if len(spans) != 5 {
		t.Fatalf("collector got %d spans, want 5", len(spans))
	}
	byID := map[string]reportedSpan{}
	for _, s := range spans {
		byID[s.ID] = s
	}
	for i, h := range upstream {
		s, ok := byID[h["x-b3-spanid"]]
		if !ok {
			t.Fatalf("request %d: upstream x-b3-spanid %q is no reported span's id", i, h["x-b3-spanid"])
		}
		if h["x-envoy-decorator-operation"] != "echo.default.svc.cluster.local:80/*" {
			t.Errorf("request %d: upstream x-envoy-decorator-operation %q, want the route's decorator operation (egress propagation)", i, h["x-envoy-decorator-operation"])
		}
		if h["x-b3-traceid"] != s.TraceID || len(s.TraceID) != 32 || h["x-b3-sampled"] != "1" {
			t.Errorf("request %d: upstream B3 %v, span trace %s", i, h, s.TraceID)
		}
		if s.Name != "echo.default.svc.cluster.local:80/*" || s.Kind != tracing.KindClient {
			t.Errorf("span name %q kind %q, want the route's decorator operation and CLIENT", s.Name, s.Kind)
		}
		for k, want := range map[string]string{
			"http.status_code": "200", "upstream_cluster": "echo", "istio.canonical_service": "sleep", "http.method": "GET",
			"node_id": "sidecar~10.0.0.5~sleep-1.default~default.svc.cluster.local", "component": "proxy", "user_agent": "test",
			"response_flags": "-", "guid:x-request-id": h["x-request-id"],
		} {
			if s.Tags[k] != want {
				t.Errorf("span tag %s = %q, want %q", k, s.Tags[k], want)
			}
		}
		if s.LocalEndpoint.ServiceName != "sleep.default" || s.LocalEndpoint.IPv4 != "10.0.0.5" || s.Duration < 1 || s.Timestamp == 0 {
			t.Errorf("span %+v: local endpoint, timestamp or duration wrong", s)
		}
		if i == 0 && (s.TraceID != incomingTrace || s.ParentID != incomingSpan || h["x-b3-parentspanid"] != incomingSpan) {
			t.Errorf("request with B3 context: span trace %s parent %s, upstream parent %q; want trace %s parent %s", s.TraceID, s.ParentID, h["x-b3-parentspanid"], incomingTrace, incomingSpan)
		}
		if i > 0 && (s.ParentID != "" || h["x-b3-parentspanid"] != "") {
			t.Errorf("request without B3 context: span parent %q, upstream parent %q; want a root span", s.ParentID, h["x-b3-parentspanid"])
		}
	}
	// The collector has the spans before the reporter reads its answer and counts them.
	sent := store.Named("tracing.zipkin").Counter("spans_sent")
	for deadline := time.Now().Add(5 * time.Second); sent.Value() != 5 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := sent.Value(); got != 5 {
		t.Errorf("tracing.zipkin.spans_sent = %d, want 5", got)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.hosts[0] != "zipkin.istio-system.svc.cluster.local" {
		t.Errorf("report Host %q, want collector_hostname", col.hosts[0])
	}
}

func TestZipkinUnsampledRequestPropagatesSampledZeroAndReportsNothing(t *testing.T) {
	l, col, _ := zipkinLab(t, false)
	_, body := l.get(t, "/", "X-B3-Sampled", "0")
	if h := seen(t, body); h["x-b3-sampled"] != "0" || len(h["x-b3-traceid"]) != 32 {
		t.Errorf("upstream B3 %v, want a new trace with x-b3-sampled 0", h)
	}
	// Four sampled ones make five if the unsampled one were reported.
	for range 4 {
		l.get(t, "/")
	}
	time.Sleep(200 * time.Millisecond)
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) != 0 {
		t.Errorf("collector got %d spans before the flush timer, want 0 (4 sampled are below min_flush_spans)", len(col.spans))
	}
}

func TestZipkinSpawnUpstreamSpanPropagatesTheRouterSpan(t *testing.T) {
	l, col, _ := zipkinLab(t, true)
	var ups []map[string]string
	for range 3 { // 6 spans: a flush at 5
		_, body := l.get(t, "/")
		ups = append(ups, seen(t, body))
	}
	spans := col.wait(t, 5)
	byID := map[string]reportedSpan{}
	for _, s := range spans {
		byID[s.ID] = s
	}
	found := 0
	for _, h := range ups {
		child, ok := byID[h["x-b3-spanid"]]
		if !ok {
			continue
		}
		parent, ok := byID[child.ParentID]
		if !ok {
			continue // the HCM's span finishes after the router's: the last one waits for the flush timer
		}
		found++
		if child.Name != "router echo egress" || parent.Name != "echo.default.svc.cluster.local:80/*" || h["x-b3-parentspanid"] != parent.ID {
			t.Errorf("upstream span %+v, parent %+v: want the router's span, child of the HCM's", child, parent)
		}
	}
	if found < 2 {
		t.Fatalf("%d of 3 upstream x-b3-spanids are reported router spans with their parents among the %d reported spans, want 2", found, len(spans))
	}
}

func TestZipkinConfigRefusesWhatTheReporterLacks(t *testing.T) {
	for name, zc := range map[string]*tracev3.ZipkinConfig{
		"v1 JSON":  {CollectorCluster: "c", CollectorEndpoint: "/api/v1/spans"},
		"protobuf": {CollectorCluster: "c", CollectorEndpoint: "/api/v2/spans", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_PROTO},
		"W3C":      {CollectorCluster: "c", CollectorEndpoint: "/api/v2/spans", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON, TraceContextOption: tracev3.ZipkinConfig_USE_B3_WITH_W3C_PROPAGATION},
		"cluster":  {CollectorEndpoint: "/api/v2/spans", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON},
	} {
		if _, err := tracing.CompileZipkin(mustAny(t, zc)); err == nil {
			t.Errorf("%s: compiled, want refused", name)
		}
	}
}

// BenchmarkZipkinTracing is a request through an outbound HCM with Istio's Zipkin
// tracing: every request sampled (a span made, tagged, encoded and posted in batches of
// 5 to a local collector), none sampled (B3 headers only), against the same HCM without
// tracing.
func BenchmarkZipkinTracing(b *testing.B) {
	for _, bc := range []struct {
		name   string
		random float64
		off    bool // no tracing block
	}{{"off", -1, true}, {"unsampled", 0, false}, {"sampled", 100, false}} {
		b.Run(bc.name, func(b *testing.B) {
			l, _, _ := zipkinLabSampled(b, false, bc.random)
			req, _ := http.NewRequest("GET", "http://"+l.addr+"/", nil)
			b.ResetTimer()
			for range b.N {
				resp, err := l.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

func echoHeadersTB(tb testing.TB) string {
	tb.Helper()
	return backend(tb, "", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]string{":path": r.RequestURI}
		for k := range r.Header {
			out[strings.ToLower(k)] = strings.Join(r.Header.Values(k), ",")
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}
