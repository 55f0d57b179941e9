package httpconn

import (
	"io"
	"net/http"
	"net/netip"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
	"github.com/meshlab/meshlab/internal/testutil"
)

// legacyTracingLab is an outbound HCM with istiod's legacy MeshConfig tracing (a tracing
// block without provider at random percent, the UUID request id extension) in a proxy
// whose bootstrap has pilot-agent's Zipkin tracer to the "zipkin" cluster, or none.
func legacyTracingLab(tb testing.TB, random float64, bootTracer bool) (*lab, *collector) {
	tb.Helper()
	col, colAddr := newCollector(tb)
	l := &lab{store: stats.NewStore()}
	cm := cluster.NewManager(l.store)
	cm.AddStatic([]*cluster.Config{staticCluster(tb, "echo", echoHeadersTB(tb)), staticCluster(tb, "zipkin", colAddr)})
	tb.Cleanup(cm.Close)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "outbound_0.0.0.0_80",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{routeTo(prefix("/"), to("echo"))}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(tb, &routerv3.Router{})}}},
		Tracing: &hcmv3.HttpConnectionManager_Tracing{
			ClientSampling: &typev3.Percent{Value: 100}, RandomSampling: &typev3.Percent{Value: random}, OverallSampling: &typev3.Percent{Value: 100},
		},
		RequestIdExtension: &hcmv3.RequestIDExtension{TypedConfig: mustAny(tb, &uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(true)})},
	}
	cfg, err := Compile(mustAny(tb, hcm))
	if err != nil {
		tb.Fatal(err)
	}
	tr := tracing.New(tracing.Node{ID: "sidecar~10.0.0.5~sleep-1.default~default.svc.cluster.local", Cluster: "sleep.default", Address: netip.MustParseAddr("10.0.0.5")},
		cm, l.store, testutil.Logger(tb))
	if bootTracer {
		// pilot-agent's bootstrap tracing.http (Istio's envoy_bootstrap.json).
		z, err := tracing.CompileZipkin(mustAny(tb, &tracev3.ZipkinConfig{
			CollectorCluster: "zipkin", CollectorEndpoint: "/api/v2/spans", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON,
			TraceId_128Bit: true, SharedSpanContext: wrapperspb.Bool(false),
		}))
		if err != nil {
			tb.Fatal(err)
		}
		tr.WithDefault(z)
	}
	l.addr = serveHCM(tb, cfg, Deps{Routes: NewRouteStore(), Clusters: cm, Stats: l.store, Logger: testutil.Logger(tb), Tracer: tr})
	l.client = &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(l.client.CloseIdleConnections)
	return l, col
}

// The bootstrap's tracer makes the spans of an HCM whose tracing names no provider, as
// Envoy uses its bootstrap tracing.http: B3 upstream, spans to the "zipkin" cluster
// with the node's local endpoint.
func TestBootstrapTracerReportsSpansOfHCMWithoutProvider(t *testing.T) {
	l, col := legacyTracingLab(t, 100, true)
	for range 5 { // Envoy's reporter flushes at 5 spans
		_, body := l.get(t, "/")
		h := seen(t, body)
		if len(h["x-b3-traceid"]) != 32 || len(h["x-b3-spanid"]) != 16 || h["x-b3-sampled"] != "1" {
			t.Errorf("upstream B3 %v, want a sampled 128-bit trace", h)
		}
		if rid := h["x-request-id"]; len(rid) != 36 || rid[14] != traceSampled {
			t.Errorf("upstream x-request-id %q, want a UUID marked sampled ('9' at 14)", rid)
		}
	}
	spans := col.wait(t, 5)
	if len(spans) != 5 {
		t.Fatalf("collector got %d spans, want 5", len(spans))
	}
	for _, s := range spans {
		if s.Kind != tracing.KindClient || s.LocalEndpoint.ServiceName != "sleep.default" || s.Tags["upstream_cluster"] != "echo" {
			t.Errorf("span %+v: want a CLIENT span of sleep.default to echo", s)
		}
	}
}

// Without a bootstrap tracer (Istio's default install: no defaultConfig.tracing) the
// HCM still takes the trace decision, packed into x-request-id, but makes no span and
// writes no B3 header. At 0 % no request is sampled.
func TestLegacyTracingWithoutTracerOnlyMarksTheRequestID(t *testing.T) {
	for _, tc := range []struct {
		random float64
		reason byte
	}{{100, traceSampled}, {0, traceNone}} {
		l, col := legacyTracingLab(t, tc.random, false)
		_, body := l.get(t, "/")
		h := seen(t, body)
		if h["x-b3-traceid"] != "" || h["x-b3-sampled"] != "" {
			t.Errorf("random %v: upstream B3 %v without a tracer, want none", tc.random, h)
		}
		if rid := h["x-request-id"]; len(rid) != 36 || rid[14] != tc.reason {
			t.Errorf("random %v: upstream x-request-id %q, want trace reason %q at 14", tc.random, rid, tc.reason)
		}
		col.mu.Lock()
		if len(col.spans) != 0 {
			t.Errorf("random %v: collector got %d spans without a tracer", tc.random, len(col.spans))
		}
		col.mu.Unlock()
	}
}

// BenchmarkForwardLegacyTracing is BenchmarkForward's "istio-sidecar" request with and
// without istiod's legacy MeshConfig tracing (every HCM's tracing block at 1 %, Istio's
// nine tags, the UUID request id extension) in a proxy without a bootstrap tracer, as
// a default install has: the cost of the 1 % sampling decision alone.
// Run: go test ./dataplane/proxy/httpconn -run '^$' -bench Forward -benchmem
func BenchmarkForwardLegacyTracing(b *testing.B) {
	for _, bc := range []struct {
		name  string
		extra func(*hcmv3.HttpConnectionManager)
	}{
		{"off", nil},
		{"1pct", func(h *hcmv3.HttpConnectionManager) {
			h.Tracing = &hcmv3.HttpConnectionManager_Tracing{
				ClientSampling: &typev3.Percent{Value: 100}, RandomSampling: &typev3.Percent{Value: 1}, OverallSampling: &typev3.Percent{Value: 100},
				CustomTags: istioTags(),
			}
			h.RequestIdExtension = &hcmv3.RequestIDExtension{TypedConfig: mustAny(b, &uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(true)})}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := newSidecarLabWith(b, false, bc.extra)
			req, _ := http.NewRequest("GET", "http://"+l.addr+"/bytes/1024", nil)
			req.Header.Set("User-Agent", "fortio.org/fortio-1.69.1")
			b.ResetTimer()
			for range b.N {
				resp, err := l.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n != 1024 {
					b.Fatalf("answer %d, %d bytes", resp.StatusCode, n)
				}
			}
		})
	}
}

// istioTags are the nine tags istiod's legacy tracing gives a sidecar's HCMs.
func istioTags() []*tracingv3.CustomTag {
	lit := func(k, v string) *tracingv3.CustomTag {
		return &tracingv3.CustomTag{Tag: k, Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: v}}}
	}
	meta := func(k, key string) *tracingv3.CustomTag {
		return &tracingv3.CustomTag{Tag: k, Type: &tracingv3.CustomTag_Metadata_{Metadata: &tracingv3.CustomTag_Metadata{
			Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Request_{Request: &metadatav3.MetadataKind_Request{}}},
			MetadataKey: &metadatav3.MetadataKey{Key: "envoy.filters.http.rbac", Path: []*metadatav3.MetadataKey_PathSegment{
				{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: key}},
			}},
		}}}
	}
	return []*tracingv3.CustomTag{
		meta("istio.authorization.dry_run.allow_policy.name", "istio_dry_run_allow_shadow_effective_policy_id"),
		meta("istio.authorization.dry_run.allow_policy.result", "istio_dry_run_allow_shadow_engine_result"),
		meta("istio.authorization.dry_run.deny_policy.name", "istio_dry_run_deny_shadow_effective_policy_id"),
		meta("istio.authorization.dry_run.deny_policy.result", "istio_dry_run_deny_shadow_engine_result"),
		lit("istio.canonical_revision", "latest"), lit("istio.canonical_service", "client"), lit("istio.cluster_id", "Kubernetes"),
		lit("istio.mesh_id", "cluster.local"), lit("istio.namespace", "default"),
	}
}
