// Package tracing is Envoy's HTTP tracing with the two tracers meshlab proxy implements.
// Zipkin's (envoy.tracers.zipkin): the B3 context read from a request and written to its
// upstream request (x-b3-traceid, x-b3-spanid, x-b3-parentspanid, x-b3-sampled), and
// the reporter that posts sampled spans to the collector cluster as Zipkin v2 JSON.
// OpenTelemetry's (envoy.tracers.opentelemetry, otel.go): the W3C trace context
// (traceparent, tracestate) and OTLP export (ExportTraceServiceRequest) over gRPC to an
// envoy_grpc cluster or over HTTP. Both batch as Envoy does (five spans, or every five
// seconds); their spans are made as the HTTP connection manager and the router make them.
package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// ZipkinName is the tracer's extension name, as an HCM's tracing.provider.name.
const ZipkinName = "envoy.tracers.zipkin"

const zipkinConfigType = "envoy.config.trace.v3.ZipkinConfig"

// zipkinAllow lists what the reporter implements. collector_endpoint_version is checked
// on its own (HTTP_JSON only).
var zipkinAllow = fieldcheck.Allow{
	"envoy.config.trace.v3.ZipkinConfig": {
		"collector_cluster", "collector_endpoint", "trace_id_128bit", "shared_span_context",
		"collector_endpoint_version", "collector_hostname", "collector_service", "trace_context_option",
	},
	"envoy.config.core.v3.HttpService":       {"http_uri", "request_headers_to_add"},
	"envoy.config.core.v3.HttpUri":           {"uri", "cluster", "timeout"},
	"envoy.config.core.v3.HeaderValueOption": {"header", "append_action", "append"},
	"envoy.config.core.v3.HeaderValue":       {"key", "value"},
}

// Zipkin is a compiled ZipkinConfig: where spans go and how span contexts are made.
type Zipkin struct {
	// Cluster is the collector cluster; Path the collector endpoint
	// (/api/v2/spans); Host the Host header of the reports (collector_hostname, or
	// the cluster's name as Envoy defaults it).
	Cluster, Path, Host string
	// Timeout bounds one report (collector_service's http_uri.timeout; Envoy's
	// legacy fields have 5 s).
	Timeout time.Duration
	// Headers are collector_service's request_headers_to_add, in order.
	Headers [][2]string
	// TraceID128 is trace_id_128bit: new traces get 128-bit ids.
	TraceID128 bool
	// SharedSpanContext is shared_span_context (Envoy's default true): a server span
	// takes the client's span id instead of a new one with the client's as parent.
	SharedSpanContext bool
}

// CompileZipkin reads an envoy.tracers.zipkin typed_config. It refuses what the reporter
// does not implement by name: the v1 and protobuf encodings, fields it does not know.
func CompileZipkin(a *anypb.Any) (*Zipkin, error) {
	if a.MessageName() != zipkinConfigType {
		return nil, fmt.Errorf("typed_config: %s takes %s, not %s", ZipkinName, zipkinConfigType, a.MessageName())
	}
	var zc tracev3.ZipkinConfig
	if err := a.UnmarshalTo(&zc); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := zipkinAllow.Check(&zc); err != nil {
		return nil, fmt.Errorf("typed_config.%w", err)
	}
	if v := zc.GetCollectorEndpointVersion(); v != tracev3.ZipkinConfig_HTTP_JSON {
		return nil, fmt.Errorf("typed_config.collector_endpoint_version: only HTTP_JSON (Zipkin v2 JSON) is supported by meshlab proxy, not %s", v)
	}
	if o := zc.GetTraceContextOption(); o != tracev3.ZipkinConfig_USE_B3 {
		return nil, fmt.Errorf("typed_config.trace_context_option: only USE_B3 is supported by meshlab proxy, not %s (leave the zipkin provider's traceContextOption unset)", o)
	}
	z := &Zipkin{
		Cluster: zc.GetCollectorCluster(), Path: zc.GetCollectorEndpoint(), Host: zc.GetCollectorHostname(),
		Timeout: 5 * time.Second, TraceID128: zc.GetTraceId_128Bit(), SharedSpanContext: true,
	}
	if v := zc.GetSharedSpanContext(); v != nil {
		z.SharedSpanContext = v.GetValue()
	}
	if svc := zc.GetCollectorService(); svc != nil {
		uri := svc.GetHttpUri()
		z.Cluster = uri.GetCluster()
		u, err := url.Parse(uri.GetUri())
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("typed_config.collector_service.http_uri.uri: %q is not a URL with a host", uri.GetUri())
		}
		z.Host, z.Path = u.Host, u.RequestURI()
		if d := uri.GetTimeout(); d != nil {
			z.Timeout = d.AsDuration()
		}
		for _, h := range svc.GetRequestHeadersToAdd() {
			z.Headers = append(z.Headers, [2]string{h.GetHeader().GetKey(), h.GetHeader().GetValue()})
		}
	}
	if z.Cluster == "" {
		return nil, errors.New("typed_config: collector_cluster (or collector_service.http_uri.cluster) is required")
	}
	if z.Path == "" {
		return nil, errors.New("typed_config: collector_endpoint (or collector_service.http_uri.uri) is required")
	}
	if z.Host == "" {
		z.Host = z.Cluster
	}
	return z, nil
}
