package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	resourcedetectors "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Envoy's OpenTelemetry tracer (envoy.tracers.opentelemetry), as istiod configures it for
// an opentelemetry extension provider: spans carry their context as W3C trace context
// (w3c.go), and finished sampled spans are buffered and exported as one
// ExportTraceServiceRequest (one ResourceSpans: the resource, service.name and what the
// resource detectors add; one ScopeSpans with the spans) over gRPC to the grpc_service's
// envoy_grpc cluster, or over HTTP (protobuf body) to the http_service's cluster. A
// span's attributes are its tags in the order first set; http.status_code 5xx (or 4xx on
// a CLIENT span) sets its status to ERROR, as Envoy's Span::setTag. What meshlab proxy
// does not implement (samplers, the dynatrace resource detector, google_grpc, custom
// exporters) is refused by name.

// OTelName is the tracer's extension name, as an HCM's tracing.provider.name.
const OTelName = "envoy.tracers.opentelemetry"

const (
	otelConfigType = "envoy.config.trace.v3.OpenTelemetryConfig"
	// otelEnvDetector is the environment resource detector, which istiod adds for
	// resource_detectors.environment.
	otelEnvDetector     = "envoy.tracers.opentelemetry.resource_detectors.environment"
	otelEnvDetectorType = "envoy.extensions.tracers.opentelemetry.resource_detectors.v3.EnvironmentResourceDetectorConfig"
	// otelResourceEnv is the variable the environment detector reads.
	otelResourceEnv = "OTEL_RESOURCE_ATTRIBUTES"
	// otelDefaultService is Envoy's service.name when service_name is empty.
	otelDefaultService = "unknown_service:envoy"
	// otelExportPath is OTLP/gRPC's trace export method.
	otelExportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	// otelExportBound bounds an export without a configured timeout: Envoy's async
	// client then waits as long as the stream lives; a bound keeps a dead collector from
	// holding a flush goroutine for ever.
	otelExportBound = 30 * time.Second
)

var otelAllow = fieldcheck.Allow{
	"envoy.config.trace.v3.OpenTelemetryConfig":  {"grpc_service", "http_service", "service_name", "resource_detectors"},
	"envoy.config.core.v3.GrpcService":           {"envoy_grpc", "timeout", "initial_metadata"},
	"envoy.config.core.v3.GrpcService.EnvoyGrpc": {"cluster_name", "authority"},
	"envoy.config.core.v3.HttpService":           {"http_uri", "request_headers_to_add"},
	"envoy.config.core.v3.HttpUri":               {"uri", "cluster", "timeout"},
	"envoy.config.core.v3.HeaderValueOption":     {"header", "append_action", "append"},
	"envoy.config.core.v3.HeaderValue":           {"key", "value"},
	"envoy.config.core.v3.TypedExtensionConfig":  {"name", "typed_config"},
}

// OTel is a compiled OpenTelemetryConfig: where spans are exported and the resource
// they describe.
type OTel struct {
	// GRPCCluster is the grpc_service's envoy_grpc cluster, Authority its :authority
	// (the cluster's name by default), Metadata its initial_metadata; "" when spans go
	// over HTTP.
	GRPCCluster, Authority string
	Metadata               [][2]string
	// HTTPCluster, Host and Path are the http_service's cluster and its URI's host and
	// path; Headers its request_headers_to_add.
	HTTPCluster, Host, Path string
	Headers                 [][2]string
	// Timeout bounds one export (grpc_service.timeout or http_uri.timeout); 0: none set.
	Timeout time.Duration
	// Resource is the spans' resource: service.name first, then the environment
	// detector's attributes in the order written.
	Resource []*commonv1.KeyValue
	key      string
}

// CompileOTel reads an envoy.tracers.opentelemetry typed_config; the environment
// detector reads OTEL_RESOURCE_ATTRIBUTES now, as Envoy reads it when the tracer is made.
func CompileOTel(a *anypb.Any) (*OTel, error) {
	return compileOTel(a, os.Getenv(otelResourceEnv))
}

func compileOTel(a *anypb.Any, resourceEnv string) (*OTel, error) {
	if a.MessageName() != otelConfigType {
		return nil, fmt.Errorf("typed_config: %s takes %s, not %s", OTelName, otelConfigType, a.MessageName())
	}
	var oc tracev3.OpenTelemetryConfig
	if err := a.UnmarshalTo(&oc); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := otelAllow.Check(&oc); err != nil {
		return nil, fmt.Errorf("typed_config.%w", err)
	}
	o := &OTel{}
	switch g, h := oc.GetGrpcService(), oc.GetHttpService(); {
	case g != nil && h != nil:
		return nil, errors.New("typed_config: grpc_service and http_service are exclusive (Envoy exports over one)")
	case g != nil:
		eg := g.GetEnvoyGrpc()
		if eg == nil || eg.GetClusterName() == "" {
			return nil, errors.New("typed_config.grpc_service: an envoy_grpc cluster_name is required (meshlab proxy exports through its own clusters; google_grpc is not supported)")
		}
		o.GRPCCluster, o.Authority = eg.GetClusterName(), eg.GetAuthority()
		if o.Authority == "" {
			o.Authority = o.GRPCCluster
		}
		o.Timeout = g.GetTimeout().AsDuration()
		for _, m := range g.GetInitialMetadata() {
			o.Metadata = append(o.Metadata, [2]string{strings.ToLower(m.GetKey()), m.GetValue()})
		}
	case h != nil:
		uri := h.GetHttpUri()
		o.HTTPCluster = uri.GetCluster()
		if o.HTTPCluster == "" {
			return nil, errors.New("typed_config.http_service.http_uri.cluster: is required")
		}
		o.Host, o.Path = hostPath(uri.GetUri())
		if o.Host == "" {
			return nil, fmt.Errorf("typed_config.http_service.http_uri.uri: %q names no host", uri.GetUri())
		}
		o.Timeout = uri.GetTimeout().AsDuration()
		for _, hv := range h.GetRequestHeadersToAdd() {
			o.Headers = append(o.Headers, [2]string{hv.GetHeader().GetKey(), hv.GetHeader().GetValue()})
		}
	default:
		return nil, errors.New("typed_config: grpc_service or http_service is required (meshlab proxy has no other exporter)")
	}
	service := oc.GetServiceName()
	if service == "" {
		service = otelDefaultService
	}
	o.Resource = []*commonv1.KeyValue{otelString("service.name", service)}
	for i, d := range oc.GetResourceDetectors() {
		if d.GetName() != otelEnvDetector || d.GetTypedConfig().MessageName() != otelEnvDetectorType {
			return nil, fmt.Errorf("typed_config.resource_detectors[%d]: %q is not supported by meshlab proxy (the environment detector, %s, is)", i, d.GetName(), otelEnvDetector)
		}
		if err := d.GetTypedConfig().UnmarshalTo(&resourcedetectors.EnvironmentResourceDetectorConfig{}); err != nil {
			return nil, fmt.Errorf("typed_config.resource_detectors[%d].typed_config: %w", i, err)
		}
		o.Resource = mergeResource(o.Resource, envResource(resourceEnv))
	}
	o.key = fmt.Sprintf("otel\x00%s\x00%s\x00%s\x00%s\x00%s\x00%v\x00%v\x00%v\x00%s", o.GRPCCluster, o.Authority, o.HTTPCluster, o.Host, o.Path, o.Metadata, o.Headers, o.Timeout, resourceString(o.Resource))
	return o, nil
}

// hostPath splits an http_uri's uri as Envoy's extractHostPathFromUri: an optional
// scheme, the host up to the first slash, the rest the path ("/" when none). istiod
// writes it without a scheme (host/v1/traces).
func hostPath(uri string) (host, path string) {
	if _, rest, ok := strings.Cut(uri, "://"); ok {
		uri = rest
	}
	i := strings.IndexByte(uri, '/')
	if i < 0 {
		return uri, "/"
	}
	return uri[:i], uri[i:]
}

// envResource is the environment resource detector's: OTEL_RESOURCE_ATTRIBUTES as
// comma-separated key=value pairs; a pair that is not one key and one value ends the
// reading, as Envoy's detector stops at a malformed pair.
func envResource(v string) []*commonv1.KeyValue {
	var out []*commonv1.KeyValue
	for _, pair := range strings.Split(v, ",") {
		if pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok || k == "" || val == "" || strings.Contains(val, "=") {
			break
		}
		out = append(out, otelString(k, val))
	}
	return out
}

// mergeResource is the OpenTelemetry resource merge: later attributes replace earlier
// ones of the same key.
func mergeResource(base, more []*commonv1.KeyValue) []*commonv1.KeyValue {
	for _, kv := range more {
		replaced := false
		for i, b := range base {
			if b.GetKey() == kv.GetKey() {
				base[i], replaced = kv, true
			}
		}
		if !replaced {
			base = append(base, kv)
		}
	}
	return base
}

func resourceString(kvs []*commonv1.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		b.WriteString(kv.GetKey() + "=" + kv.GetValue().GetStringValue() + ",")
	}
	return b.String()
}

func otelString(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// Start begins the request's span from its W3C trace context (startW3C).
func (o *OTel) Start(h http.Header, kind, name string, traced bool, now time.Time) *Span {
	return startW3C(h, kind, name, traced, now)
}

// SpanKind is Envoy's OpenTelemetry getSpanKind: SERVER when the router spawns the
// upstream span (the proxy is a hop of its own) or on an inbound listener, CLIENT
// otherwise.
func (o *OTel) SpanKind(inbound, spawnUpstream bool) string {
	if spawnUpstream || inbound {
		return KindServer
	}
	return KindClient
}

func (o *OTel) collector() string { return o.key }

// otelStats are Envoy's tracing.opentelemetry.* counters.
type otelStats struct {
	sent, timer *stats.Stat
}

func newOTelStats(st *stats.Store) otelStats {
	sc := st.Named("tracing.opentelemetry")
	return otelStats{sent: sc.Counter("spans_sent"), timer: sc.Counter("timer_flushed")}
}

// export sends one batch as Envoy's Tracer::flushSpans: spans_sent counts the spans
// handed to the exporter whatever its answer, and a failed export is dropped.
func (o *OTel) export(t *Tracer, batch []*Span, timer bool) {
	if timer {
		t.otel.timer.Inc()
	}
	req := o.Request(batch)
	t.otel.sent.Add(int64(len(batch)))
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = otelExportBound
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	if o.GRPCCluster != "" {
		err = t.exportGRPC(ctx, o, req)
	} else {
		err = t.exportHTTP(ctx, o, req)
	}
	if err != nil {
		t.log.Debug("opentelemetry: export failed", "spans", len(batch), "err", err)
	}
}

// Request is the ExportTraceServiceRequest of a batch, as Envoy's flushSpans builds it.
func (o *OTel) Request(batch []*Span) *coltrace.ExportTraceServiceRequest {
	spans := make([]*tracev1.Span, 0, len(batch))
	for _, s := range batch {
		spans = append(spans, otlpSpan(s))
	}
	return &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource:   &resourcev1.Resource{Attributes: o.Resource},
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: spans}},
	}}}
}

func otlpSpan(s *Span) *tracev1.Span {
	traceID, _ := hex.DecodeString(s.TraceID)
	id, _ := hex.DecodeString(s.ID)
	var parent []byte
	if s.ParentID != "" {
		parent, _ = hex.DecodeString(s.ParentID)
	}
	kind := tracev1.Span_SPAN_KIND_CLIENT
	if s.Kind == KindServer {
		kind = tracev1.Span_SPAN_KIND_SERVER
	}
	out := &tracev1.Span{
		TraceId: traceID, SpanId: id, ParentSpanId: parent, TraceState: s.TraceState, Name: s.Name, Kind: kind,
		StartTimeUnixNano: uint64(s.Start.UnixNano()),                 //nolint:gosec // times after 1970
		EndTimeUnixNano:   uint64(s.Start.Add(s.Duration).UnixNano()), //nolint:gosec // times after 1970
		Status:            &tracev1.Status{},
	}
	for _, k := range s.TagOrder {
		if k == "" {
			continue // an attribute key must not be empty
		}
		out.Attributes = append(out.Attributes, otelString(k, s.Tags[k]))
	}
	if code, err := strconv.Atoi(s.Tags["http.status_code"]); err == nil && (code >= 500 || (code >= 400 && kind == tracev1.Span_SPAN_KIND_CLIENT)) {
		out.Status.Code = tracev1.Status_STATUS_CODE_ERROR
	}
	return out
}

// exportGRPC sends req on the grpc_service's channel: one per cluster and authority,
// dialling the cluster's hosts through its transport socket.
func (t *Tracer) exportGRPC(ctx context.Context, o *OTel, req *coltrace.ExportTraceServiceRequest) error {
	conn, err := t.otelConn(o.GRPCCluster, o.Authority)
	if err != nil {
		return err
	}
	for _, kv := range o.Metadata {
		ctx = metadata.AppendToOutgoingContext(ctx, kv[0], kv[1])
	}
	return conn.Invoke(ctx, otelExportPath, req, &coltrace.ExportTraceServiceResponse{})
}

func (t *Tracer) otelConn(cluster, authority string) (*grpc.ClientConn, error) {
	key := cluster + "\x00" + authority
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns == nil {
		return nil, errors.New("tracer closed")
	}
	if c, ok := t.conns[key]; ok {
		return c, nil
	}
	c, err := grpc.NewClient("passthrough:///"+authority,
		grpc.WithTransportCredentials(insecure.NewCredentials()), // the cluster's transport socket secures the connection
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			cl, ok := t.clusters.Get(cluster)
			if !ok {
				return nil, fmt.Errorf("collector cluster %s not found", cluster)
			}
			h, err := cl.Pick(netip.AddrPort{})
			if err != nil {
				return nil, err
			}
			return cl.Dial(ctx, h)
		}))
	if err != nil {
		return nil, fmt.Errorf("otlp channel to %s: %w", cluster, err)
	}
	t.conns[key] = c
	return c, nil
}

// exportHTTP posts req, protobuf-encoded, to the http_service's cluster, as Envoy's
// OpenTelemetryHttpTraceExporter.
func (t *Tracer) exportHTTP(ctx context.Context, o *OTel, req *coltrace.ExportTraceServiceRequest) error {
	body, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	cl, ok := t.clusters.Get(o.HTTPCluster)
	if !ok {
		return fmt.Errorf("collector cluster %s not found", o.HTTPCluster)
	}
	h, err := cl.Pick(netip.AddrPort{})
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+o.Host+o.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/x-protobuf")
	for _, kv := range o.Headers {
		r.Header.Set(kv[0], kv[1])
	}
	resp, err := cl.RoundTrip(r, h)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("collector answered %s", resp.Status)
	}
	return nil
}
