package otelcol

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/demoapp"
)

// The traces side of the sample's otlp receiver (gRPC on 4317, HTTP on 4318, /v1/traces
// and /v1/logs with protobuf or JSON bodies, otlpjson.go) and of Jaeger's
// (jaegertracing/all-in-one takes OTLP on the same ports and stores the spans). Another
// Content-Type is answered 415, as the collector answers it.

func init() { demoapp.RegisterOTLPTraceReceiver(ServeOTLPTraces) }

// maxOTLPBody bounds an OTLP/HTTP request's body (the collector's default max_request_body_size is 20 MiB).
const maxOTLPBody = 20 << 20

// tracesServer is an otlp receiver of a traces pipeline: each export goes to sink.
type tracesServer struct {
	coltrace.UnimplementedTraceServiceServer
	sink func(*coltrace.ExportTraceServiceRequest)
}

// Export hands the request to the pipeline and accepts every span.
func (s *tracesServer) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.sink(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// The OTLP/HTTP encodings, by Content-Type.
const (
	otlpProtobuf = "application/x-protobuf"
	otlpJSON     = "application/json"
)

// otlpHTTP is the otlp receiver's HTTP protocol: POST /v1/traces (and /v1/logs when
// logs is set) with a protobuf or JSON body, answered with the response in the
// request's encoding.
func otlpHTTP(traces func(*coltrace.ExportTraceServiceRequest), logs func(*collogs.ExportLogsServiceRequest)) http.Handler {
	mux := http.NewServeMux()
	// read decodes the request's body into m and returns its encoding, "" when it
	// answered an error.
	read := func(w http.ResponseWriter, r *http.Request, m proto.Message) string {
		ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
		ct = strings.ToLower(strings.TrimSpace(ct))
		if ct != otlpProtobuf && ct != otlpJSON {
			http.Error(w, "415 unsupported media type, supported: [application/json, application/x-protobuf]", http.StatusUnsupportedMediaType)
			return ""
		}
		var body io.Reader = http.MaxBytesReader(w, r.Body, maxOTLPBody)
		switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
		case "", "identity":
		case "gzip":
			// The collector's confighttp decompresses gzip (what OTel SDKs send
			// compressed); the decompressed body is bounded as the raw one.
			zr, err := gzip.NewReader(body)
			if err != nil {
				http.Error(w, "400 bad request: gzip: "+err.Error(), http.StatusBadRequest)
				return ""
			}
			defer zr.Close()
			body = io.LimitReader(zr, maxOTLPBody+1)
		default:
			http.Error(w, "400 bad request: Content-Encoding "+strconv.Quote(enc)+" is not taken by meshlab's OTLP receiver (gzip is; or send the body uncompressed)", http.StatusBadRequest)
			return ""
		}
		b, err := io.ReadAll(body)
		if err == nil && len(b) > maxOTLPBody {
			err = errors.New("the decompressed body is over the receiver's 20 MiB")
		}
		if err == nil {
			if ct == otlpJSON {
				err = unmarshalOTLPJSON(b, m) // otlpjson.go
			} else {
				err = proto.Unmarshal(b, m)
			}
		}
		if err != nil {
			http.Error(w, "400 bad request: "+err.Error(), http.StatusBadRequest)
			return ""
		}
		return ct
	}
	reply := func(w http.ResponseWriter, ct string, m proto.Message) {
		var b []byte
		if ct == otlpJSON {
			b, _ = protojson.Marshal(m)
		} else {
			b, _ = proto.Marshal(m)
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(b)
	}
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		req := &coltrace.ExportTraceServiceRequest{}
		if ct := read(w, r, req); ct != "" {
			traces(req)
			reply(w, ct, &coltrace.ExportTraceServiceResponse{})
		}
	})
	if logs != nil {
		mux.HandleFunc("POST /v1/logs", func(w http.ResponseWriter, r *http.Request) {
			req := &collogs.ExportLogsServiceRequest{}
			if ct := read(w, r, req); ct != "" {
				logs(req)
				reply(w, ct, &collogs.ExportLogsServiceResponse{})
			}
		})
	}
	return mux
}

// serveGRPCAndHTTP serves srv on grpcLn and h on httpLn (either may be nil) until ctx
// ends or one fails.
func serveGRPCAndHTTP(ctx context.Context, srv *grpc.Server, grpcLn net.Listener, h http.Handler, httpLn net.Listener, log *slog.Logger) error {
	errc := make(chan error, 2)
	n := 0
	if grpcLn != nil {
		n++
		log.Info("otlp receiver: grpc", "addr", grpcLn.Addr().String())
		go func() { errc <- srv.Serve(grpcLn) }()
	}
	var hs *http.Server
	if httpLn != nil {
		n++
		hs = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		log.Info("otlp receiver: http", "addr", httpLn.Addr().String())
		go func() { errc <- hs.Serve(httpLn) }()
	}
	var failed error
	select {
	case <-ctx.Done():
	case failed = <-errc:
		n--
	}
	srv.GracefulStop()
	if hs != nil {
		_ = hs.Close()
	}
	for range n {
		<-errc
	}
	if failed != nil && !errors.Is(failed, http.ErrServerClosed) && !errors.Is(failed, grpc.ErrServerStopped) && ctx.Err() == nil {
		return fmt.Errorf("serve otlp: %w", failed)
	}
	return nil
}

// ServeOTLPTraces is Jaeger's OTLP receiver: exports taken on grpcLn and httpLn become
// Zipkin v2 JSON spans handed to deliver (the span store), until ctx ends.
func ServeOTLPTraces(ctx context.Context, grpcLn, httpLn net.Listener, deliver func(zipkinJSON []byte) error, log *slog.Logger) error {
	sink := func(req *coltrace.ExportTraceServiceRequest) {
		b, err := json.Marshal(zipkinSpans(req.GetResourceSpans()))
		if err == nil {
			err = deliver(b)
		}
		if err != nil {
			log.Warn("otlp receiver: spans not stored", "err", err)
		}
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, &tracesServer{sink: sink})
	return serveGRPCAndHTTP(ctx, srv, grpcLn, otlpHTTP(sink, nil), httpLn, log)
}

// zipkinSpan is a span as Zipkin's v2 JSON (the stand-in store's form) writes it.
type zipkinSpan struct {
	TraceID       string `json:"traceId"`
	ParentID      string `json:"parentId,omitempty"`
	ID            string `json:"id"`
	Kind          string `json:"kind,omitempty"`
	Name          string `json:"name,omitempty"`
	Timestamp     int64  `json:"timestamp,omitempty"`
	Duration      int64  `json:"duration,omitempty"`
	LocalEndpoint *struct {
		ServiceName string `json:"serviceName,omitempty"`
	} `json:"localEndpoint,omitempty"`
	Tags map[string]string `json:"tags,omitempty"`
}

// zipkinSpans converts OTLP spans as the OpenTelemetry-to-Zipkin translation Jaeger's
// Zipkin API and the collector's zipkin exporter use: the resource's service.name as the
// local endpoint's service, SERVER/CLIENT/PRODUCER/CONSUMER kinds (none for internal),
// microsecond times, attributes as tags (non-strings as their string form), an ERROR
// status as otel.status_code and error tags.
func zipkinSpans(rss []*tracev1.ResourceSpans) []zipkinSpan {
	var out []zipkinSpan
	for _, rs := range rss {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				z := zipkinSpan{
					TraceID: hex.EncodeToString(sp.GetTraceId()), ID: hex.EncodeToString(sp.GetSpanId()), ParentID: hexID(sp.GetParentSpanId()),
					Kind: zipkinKind(sp.GetKind()), Name: sp.GetName(),
					Timestamp: int64(sp.GetStartTimeUnixNano() / 1000), //nolint:gosec // times until 2262
				}
				if end, start := sp.GetEndTimeUnixNano(), sp.GetStartTimeUnixNano(); end > start {
					z.Duration = int64((end - start) / 1000) //nolint:gosec // span lengths fit
				}
				if z.Duration < 1 {
					z.Duration = 1
				}
				if service != "" {
					z.LocalEndpoint = &struct {
						ServiceName string `json:"serviceName,omitempty"`
					}{service}
				}
				z.Tags = map[string]string{}
				for _, kv := range sp.GetAttributes() {
					_, s := valueParts(kv.GetValue())
					z.Tags[kv.GetKey()] = s
				}
				if sp.GetStatus().GetCode() == tracev1.Status_STATUS_CODE_ERROR {
					z.Tags["otel.status_code"] = "ERROR"
					z.Tags["error"] = valueOr(sp.GetStatus().GetMessage(), "true")
				}
				out = append(out, z)
			}
		}
	}
	return out
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func zipkinKind(k tracev1.Span_SpanKind) string {
	switch k {
	case tracev1.Span_SPAN_KIND_SERVER:
		return "SERVER"
	case tracev1.Span_SPAN_KIND_CLIENT:
		return "CLIENT"
	case tracev1.Span_SPAN_KIND_PRODUCER:
		return "PRODUCER"
	case tracev1.Span_SPAN_KIND_CONSUMER:
		return "CONSUMER"
	}
	return ""
}

// MarshalTraces is the collector's otlptext form of resource spans (the debug
// exporter's detailed verbosity).
func MarshalTraces(rss []*tracev1.ResourceSpans) string {
	var b otlpText
	line, attrs := b.line, b.attrs
	field := func(name, v string) { line("    %-15s: %s", name, v) }
	for i, rs := range rss {
		line("ResourceSpans #%d", i)
		line("Resource SchemaURL: %s", rs.GetSchemaUrl())
		attrs("Resource attributes", rs.GetResource().GetAttributes())
		for j, ss := range rs.GetScopeSpans() {
			line("ScopeSpans #%d", j)
			line("ScopeSpans SchemaURL: %s", ss.GetSchemaUrl())
			line("InstrumentationScope %s %s", ss.GetScope().GetName(), ss.GetScope().GetVersion())
			attrs("InstrumentationScope attributes", ss.GetScope().GetAttributes())
			for k, sp := range ss.GetSpans() {
				line("Span #%d", k)
				field("Trace ID", hexID(sp.GetTraceId()))
				field("Parent ID", hexID(sp.GetParentSpanId()))
				field("ID", hexID(sp.GetSpanId()))
				field("Name", sp.GetName())
				field("Kind", spanKind(sp.GetKind()))
				if ts := sp.GetTraceState(); ts != "" {
					field("TraceState", ts)
				}
				field("Start time", timestamp(sp.GetStartTimeUnixNano()))
				field("End time", timestamp(sp.GetEndTimeUnixNano()))
				field("Status code", statusCode(sp.GetStatus().GetCode()))
				field("Status message", sp.GetStatus().GetMessage())
				attrs("Attributes", sp.GetAttributes())
			}
		}
	}
	return b.String()
}

// spanKind is ptrace.SpanKind's String.
func spanKind(k tracev1.Span_SpanKind) string {
	names := []string{"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"}
	if int(k) >= 0 && int(k) < len(names) {
		return names[k]
	}
	return ""
}

// statusCode is ptrace.StatusCode's String.
func statusCode(c tracev1.Status_StatusCode) string {
	switch c {
	case tracev1.Status_STATUS_CODE_OK:
		return "Ok"
	case tracev1.Status_STATUS_CODE_ERROR:
		return "Error"
	}
	return "Unset"
}

// traces prints one trace export as the debug exporter at verbosity detailed.
func (p *printer) traces(rss []*tracev1.ResourceSpans, now time.Time) {
	spans := 0
	for _, rs := range rss {
		for _, ss := range rs.GetScopeSpans() {
			spans += len(ss.GetSpans())
		}
	}
	p.export(now, "Traces", "traces", fmt.Sprintf(`"resource spans": %d, "spans": %d`, len(rss), spans), MarshalTraces(rss))
}
