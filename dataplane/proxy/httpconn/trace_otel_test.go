package httpconn

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
	"github.com/meshlab/meshlab/internal/testutil"
)

// otlpCollector is an OTLP trace receiver: every export's resource spans, with the
// :authority and metadata (gRPC) or path and headers (HTTP) they came with.
type otlpCollector struct {
	coltrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	exports []*coltrace.ExportTraceServiceRequest
	meta    []metadata.MD
	headers []http.Header
}

func (c *otlpCollector) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c.mu.Lock()
	c.exports = append(c.exports, req)
	c.meta = append(c.meta, md)
	c.mu.Unlock()
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (c *otlpCollector) spans(t *testing.T, n int) ([]*tracev1.Span, []*coltrace.ExportTraceServiceRequest) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		var got []*tracev1.Span
		for _, e := range c.exports {
			for _, rs := range e.GetResourceSpans() {
				for _, ss := range rs.GetScopeSpans() {
					got = append(got, ss.GetSpans()...)
				}
			}
		}
		exports := append([]*coltrace.ExportTraceServiceRequest(nil), c.exports...)
		c.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got, exports
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveOTLPGRPC serves c's TraceService on a loopback port.
func serveOTLPGRPC(tb testing.TB, c *otlpCollector) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String()
}

// serveOTLPHTTP takes OTLP/HTTP protobuf exports on /v1/traces.
func serveOTLPHTTP(tb testing.TB, c *otlpCollector) string {
	tb.Helper()
	return backend(tb, "", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		req := &coltrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.exports = append(c.exports, req)
		h := r.Header.Clone()
		h.Set("Host", r.Host)
		c.headers = append(c.headers, h)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
}

const otelCollectorCluster = "outbound|4317||opentelemetry-collector.observability.svc.cluster.local"

// otelLab is an outbound HCM tracing every request with the OpenTelemetry tracer, as
// istiod configures it for an opentelemetry provider: over gRPC (envoy_grpc with the
// collector's hostname as authority), or over HTTP when httpExport.
func otelLab(tb testing.TB, httpExport, spawn bool) (*lab, *otlpCollector, *stats.Store) {
	tb.Helper()
	col := &otlpCollector{}
	up := echoHeadersTB(tb)
	oc := &tracev3.OpenTelemetryConfig{ServiceName: "sleep.default"}
	var colAddr string
	if httpExport {
		colAddr = serveOTLPHTTP(tb, col)
		oc.HttpService = &corev3.HttpService{
			HttpUri: &corev3.HttpUri{
				Uri:              "opentelemetry-collector.observability.svc.cluster.local/v1/traces",
				HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: otelCollectorCluster}, Timeout: durationpb.New(5 * time.Second),
			},
			RequestHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "custom-header", Value: "custom value"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}},
		}
	} else {
		colAddr = serveOTLPGRPC(tb, col)
		oc.GrpcService = &corev3.GrpcService{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{
				ClusterName: otelCollectorCluster, Authority: "opentelemetry-collector.observability.svc.cluster.local",
			}},
			InitialMetadata: []*corev3.HeaderValue{{Key: "x-tenant", Value: "lab"}},
		}
	}
	l := &lab{store: stats.NewStore()}
	cm := cluster.NewManager(l.store)
	cm.AddStatic([]*cluster.Config{staticCluster(tb, "echo", up), staticCluster(tb, otelCollectorCluster, colAddr)})
	tb.Cleanup(cm.Close)
	r := routeTo(prefix("/"), to("echo"))
	r.Decorator = &routev3.Decorator{Operation: "echo.default.svc.cluster.local:80/*"}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "outbound_0.0.0.0_80",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{r}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(tb, &routerv3.Router{})}}},
		Tracing: &hcmv3.HttpConnectionManager_Tracing{
			ClientSampling: &typev3.Percent{Value: 100}, RandomSampling: &typev3.Percent{Value: 100}, OverallSampling: &typev3.Percent{Value: 100},
			CustomTags: []*tracingv3.CustomTag{{Tag: "my-attribute", Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: "default-value"}}}},
			Provider:   &tracev3.Tracing_Http{Name: tracing.OTelName, ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(tb, oc)}},
		},
	}
	if spawn {
		hcm.Tracing.SpawnUpstreamSpan = wrapperspb.Bool(true)
	}
	cfg, err := Compile(mustAny(tb, hcm))
	if err != nil {
		tb.Fatal(err)
	}
	tr := tracing.New(tracing.Node{ID: "sidecar~10.0.0.5~sleep-1.default~default.svc.cluster.local", Cluster: "sleep.default", Address: netip.MustParseAddr("10.0.0.5")},
		cm, l.store, testutil.Logger(tb))
	tb.Cleanup(tr.Close)
	l.addr = serveHCM(tb, cfg, Deps{Routes: NewRouteStore(), Clusters: cm, Stats: l.store, Logger: testutil.Logger(tb), Tracer: tr})
	l.client = &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(l.client.CloseIdleConnections)
	return l, col, l.store
}

func attrs(s *tracev1.Span) (keys []string, m map[string]string) {
	m = map[string]string{}
	for _, kv := range s.GetAttributes() {
		keys = append(keys, kv.GetKey())
		m[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return keys, m
}

// Five requests make one OTLP/gRPC export (min_flush_spans), to the cluster with the
// collector's authority and the initial metadata; each upstream request carries the
// span's context as traceparent and tracestate; a request's traceparent makes its span a
// child that keeps its sampled flag and tracestate.
func TestOTelSpansAreExportedOverGRPCAndPropagatedAsW3C(t *testing.T) {
	l, col, store := otelLab(t, false, false)
	const incomingTrace, incomingSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var upstream []map[string]string
	for i := range 5 {
		hdr := []string{"User-Agent", "test"}
		if i == 0 {
			hdr = append(hdr, "Traceparent", "00-"+incomingTrace+"-"+incomingSpan+"-01", "Tracestate", "congo=t61rcWkgMzE")
		}
		_, body := l.get(t, "/reviews/0", hdr...)
		upstream = append(upstream, seen(t, body))
	}
	spans, exports := col.spans(t, 5)
	if len(spans) != 5 || len(exports) != 1 {
		t.Fatalf("collector got %d spans in %d exports, want 5 in 1", len(spans), len(exports))
	}
	rs := exports[0].GetResourceSpans()[0]
	if kv := rs.GetResource().GetAttributes(); len(kv) != 1 || kv[0].GetKey() != "service.name" || kv[0].GetValue().GetStringValue() != "sleep.default" {
		t.Errorf("resource %v, want service.name sleep.default", kv)
	}
	col.mu.Lock()
	md := col.meta[0]
	col.mu.Unlock()
	if md.Get(":authority")[0] != "opentelemetry-collector.observability.svc.cluster.local" || md.Get("x-tenant")[0] != "lab" {
		t.Errorf("export metadata %v, want the envoy_grpc authority and the initial metadata", md)
	}
	byID := map[string]*tracev1.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
	}
	for i, h := range upstream {
		parts := strings.Split(h["traceparent"], "-")
		if len(parts) != 4 || parts[0] != "00" || parts[3] != "01" {
			t.Fatalf("request %d: upstream traceparent %q, want a sampled version 00 one", i, h["traceparent"])
		}
		s, ok := byID[parts[2]]
		if !ok {
			t.Fatalf("request %d: upstream traceparent's span %s is no exported span", i, parts[2])
		}
		if hex.EncodeToString(s.GetTraceId()) != parts[1] || s.GetName() != "echo.default.svc.cluster.local:80/*" || s.GetKind() != tracev1.Span_SPAN_KIND_CLIENT {
			t.Errorf("request %d: span %v, want the upstream's trace, the decorator's name, CLIENT", i, s)
		}
		keys, m := attrs(s)
		wantOrder := []string{"node_id", "zone", "guid:x-request-id", "http.url", "http.method", "downstream_cluster", "user_agent", "http.protocol", "peer.address", "request_size", "response_size", "component", "upstream_cluster", "upstream_cluster.name"}
		if len(keys) < len(wantOrder) || strings.Join(keys[:len(wantOrder)], " ") != strings.Join(wantOrder, " ") {
			t.Errorf("request %d: attributes in order %v, want Envoy's %v first", i, keys, wantOrder)
		}
		if m["my-attribute"] != "default-value" || m["http.status_code"] != "200" || m["guid:x-request-id"] != h["x-request-id"] || m["user_agent"] != "test" {
			t.Errorf("request %d: attributes %v", i, m)
		}
		if s.GetStatus().GetCode() != tracev1.Status_STATUS_CODE_UNSET || s.GetEndTimeUnixNano() < s.GetStartTimeUnixNano() || s.GetStartTimeUnixNano() == 0 {
			t.Errorf("request %d: status %v, times %d..%d", i, s.GetStatus(), s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano())
		}
		if i == 0 {
			if parts[1] != incomingTrace || hex.EncodeToString(s.GetParentSpanId()) != incomingSpan || s.GetTraceState() != "congo=t61rcWkgMzE" || h["tracestate"] != "congo=t61rcWkgMzE" {
				t.Errorf("request with a traceparent: span %v, upstream %v; want the caller's trace, parent and tracestate", s, h)
			}
		} else if len(s.GetParentSpanId()) != 0 || len(s.GetTraceId()) != 16 {
			t.Errorf("request %d without context: span %v, want a root span of a new 128-bit trace", i, s)
		}
	}
	if got := store.Named("tracing.opentelemetry").Counter("spans_sent").Value(); got != 5 {
		t.Errorf("tracing.opentelemetry.spans_sent = %d, want 5", got)
	}
}

// OTLP/HTTP: the protobuf export is posted to the URI's path on the cluster, with the
// URI's host and the http_service's headers.
func TestOTelSpansAreExportedOverHTTP(t *testing.T) {
	l, col, _ := otelLab(t, true, false)
	for range 5 {
		l.get(t, "/v1/items")
	}
	spans, _ := col.spans(t, 5)
	if len(spans) != 5 {
		t.Fatalf("collector got %d spans, want 5", len(spans))
	}
	col.mu.Lock()
	h := col.headers[0]
	col.mu.Unlock()
	if h.Get("Custom-Header") != "custom value" || h.Get("Host") != "opentelemetry-collector.observability.svc.cluster.local" {
		t.Errorf("export headers %v, want the http_service's header and the URI's host", h)
	}
}

// A CLIENT span of a 4xx answer, and any span of a 5xx one, has status ERROR.
func TestOTelSpanStatusFollowsTheStatusCode(t *testing.T) {
	o := &tracing.OTel{}
	mk := func(kind, code string) *tracing.Span {
		s := &tracing.Span{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ID: "00f067aa0ba902b7", Kind: kind, Sampled: true}
		s.SetTag("http.status_code", code)
		return s
	}
	req := o.Request([]*tracing.Span{mk(tracing.KindClient, "404"), mk(tracing.KindServer, "404"), mk(tracing.KindServer, "503"), mk(tracing.KindClient, "200")})
	want := []tracev1.Status_StatusCode{tracev1.Status_STATUS_CODE_ERROR, tracev1.Status_STATUS_CODE_UNSET, tracev1.Status_STATUS_CODE_ERROR, tracev1.Status_STATUS_CODE_UNSET}
	for i, s := range req.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans() {
		if s.GetStatus().GetCode() != want[i] {
			t.Errorf("span %d (%v): status %v, want %v", i, s.GetKind(), s.GetStatus().GetCode(), want[i])
		}
	}
}

// An unsampled traceparent is propagated unsampled and nothing is exported; a malformed
// one makes no span (Envoy's NullSpan): it goes upstream as it came.
func TestOTelUnsampledAndMalformedContexts(t *testing.T) {
	l, col, _ := otelLab(t, false, false)
	_, body := l.get(t, "/", "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if h := seen(t, body); !strings.HasPrefix(h["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(h["traceparent"], "-00") || strings.Contains(h["traceparent"], "00f067aa0ba902b7") {
		t.Errorf("upstream traceparent %q, want the caller's trace, a new span id, unsampled", h["traceparent"])
	}
	const malformed = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
	_, body = l.get(t, "/", "Traceparent", malformed)
	if h := seen(t, body); h["traceparent"] != malformed {
		t.Errorf("upstream traceparent %q, want the malformed one passed as it came (no span)", h["traceparent"])
	}
	for range 3 { // with 2 spans more the buffer would flush if either were reported
		l.get(t, "/")
	}
	time.Sleep(200 * time.Millisecond)
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.exports) != 0 {
		t.Errorf("collector got %d exports before the flush timer, want 0 (3 sampled spans are below min_flush_spans)", len(col.exports))
	}
}

// On a gateway (spawn_upstream_span) the HCM's span is SERVER and the router's CLIENT
// child is the one propagated, as Envoy's getSpanKind and spawnChild.
func TestOTelSpawnUpstreamSpanKinds(t *testing.T) {
	l, col, _ := otelLab(t, false, true)
	var ups []map[string]string
	for range 3 {
		_, body := l.get(t, "/")
		ups = append(ups, seen(t, body))
	}
	spans, _ := col.spans(t, 5)
	byID := map[string]*tracev1.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
	}
	found := 0
	for _, h := range ups {
		child, ok := byID[strings.Split(h["traceparent"], "-")[2]]
		if !ok {
			continue
		}
		parent, ok := byID[hex.EncodeToString(child.GetParentSpanId())]
		if !ok {
			continue
		}
		found++
		if child.GetKind() != tracev1.Span_SPAN_KIND_CLIENT || child.GetName() != "router echo egress" || parent.GetKind() != tracev1.Span_SPAN_KIND_SERVER {
			t.Errorf("router span %v under %v: want CLIENT under the HCM's SERVER span", child, parent)
		}
	}
	if found < 2 {
		t.Fatalf("%d of 3 upstream spans reported with their parents, want 2", found)
	}
}

func TestOTelConfigRefusesWhatTheTracerLacks(t *testing.T) {
	grpcSvc := &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "c"}}}
	for name, tc := range map[string]struct {
		oc   *tracev3.OpenTelemetryConfig
		want string
	}{
		"sampler": {&tracev3.OpenTelemetryConfig{GrpcService: grpcSvc, Sampler: &corev3.TypedExtensionConfig{Name: "envoy.tracers.opentelemetry.samplers.dynatrace"}}, "typed_config.sampler"},
		"dynatrace detector": {&tracev3.OpenTelemetryConfig{GrpcService: grpcSvc, ResourceDetectors: []*corev3.TypedExtensionConfig{{
			Name: "envoy.tracers.opentelemetry.resource_detectors.dynatrace", TypedConfig: mustAny(t, &tracev3.ZipkinConfig{}),
		}}}, "typed_config.resource_detectors[0]"},
		"google_grpc": {&tracev3.OpenTelemetryConfig{GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{TargetUri: "c:4317"}}}}, "google_grpc"},
		"no exporter": {&tracev3.OpenTelemetryConfig{ServiceName: "s"}, "grpc_service or http_service is required"},
	} {
		_, err := tracing.CompileOTel(mustAny(t, tc.oc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want refused naming %q", name, err, tc.want)
		}
	}
}

// BenchmarkOTelTracing is a request through an HCM whose every span is exported by the
// OpenTelemetry tracer (OTLP/gRPC or OTLP/HTTP, batches of 5) to an in-process
// collector, beside the Zipkin tracer's sampled case for comparison.
func BenchmarkOTelTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		lab  func(testing.TB) *lab
	}{
		{"zipkin", func(tb testing.TB) *lab { tb.Helper(); l, _, _ := zipkinLab(tb, false); return l }},
		{"otel-grpc", func(tb testing.TB) *lab { tb.Helper(); l, _, _ := otelLab(tb, false, false); return l }},
		{"otel-http", func(tb testing.TB) *lab { tb.Helper(); l, _, _ := otelLab(tb, true, false); return l }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := bc.lab(b)
			req, _ := http.NewRequest(http.MethodGet, "http://"+l.addr+"/", nil)
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
