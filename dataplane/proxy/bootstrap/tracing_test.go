package bootstrap

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

// Istio's envoy_bootstrap.json tracing section (defaultConfig.tracing.zipkin) compiles
// to the Zipkin tracer of its "zipkin" cluster; another tracer, an unknown cluster or a
// field the tracer lacks is refused by name.
func TestTracer(t *testing.T) {
	t.Parallel()
	const istio = `{"tracing": {"http": {"name": "envoy.tracers.zipkin", "typed_config": {
		"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
		"collector_cluster": "zipkin", "collector_endpoint": "/api/v2/spans",
		"collector_endpoint_version": "HTTP_JSON", "trace_id_128bit": true, "shared_span_context": false}}}}`
	parse := func(js string) *bootstrapv3.Bootstrap {
		t.Helper()
		b := &bootstrapv3.Bootstrap{}
		if err := Parse([]byte(js), true, false, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	has := func(name string) bool { return name == "zipkin" }
	z, err := Tracer(parse(istio), has)
	if err != nil || z == nil || z.Cluster != "zipkin" || z.Path != "/api/v2/spans" || z.Host != "zipkin" || !z.TraceID128 || z.SharedSpanContext {
		t.Fatalf("Tracer = %+v, %v; want the zipkin cluster's /api/v2/spans, 128-bit ids, no shared span context", z, err)
	}
	if err := Check(parse(istio)); err != nil {
		t.Errorf("Check refuses the tracing section: %v", err)
	}
	if z, err := Tracer(parse(`{}`), has); z != nil || err != nil {
		t.Errorf("no tracing: Tracer = %v, %v; want nil, nil", z, err)
	}
	for _, tc := range []struct{ js, want string }{
		{strings.Replace(istio, `"collector_cluster": "zipkin"`, `"collector_cluster": "nope"`, 1), `collector_cluster "nope" is not a static cluster`},
		{`{"tracing": {"http": {"name": "envoy.tracers.datadog", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.DatadogConfig", "collector_cluster": "zipkin", "service_name": "x"}}}}`, `tracing.http.name: "envoy.tracers.datadog" is not a tracer of meshlab proxy`},
		{strings.Replace(istio, `"HTTP_JSON"`, `"HTTP_PROTO"`, 1), `tracing.http.typed_config.collector_endpoint_version: only HTTP_JSON`},
	} {
		if _, err := Tracer(parse(tc.js), has); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Tracer(%s) = %v, want %q", tc.js, err, tc.want)
		}
	}
}
