// Package otelcol is the built-in app's opentelemetry-collector persona
// (demoapp.PersonaOTelCollector): the OpenTelemetry collector of Istio's
// samples/open-telemetry/otel.yaml as the logs tasks read it. It takes OTLP logs on
// gRPC (the otlp receiver's grpc protocol, the port the container declares first, 4317)
// and prints every export as the collector's debug exporter at verbosity detailed does,
// on stdout, which `kubectl logs -l app=opentelemetry-collector` reads. It is a package
// of its own because it brings gRPC and OTLP's types: `meshlab app` links it (and
// registers it with demoapp), the small meshlab-app binary does not. Its traces
// pipeline (traces.go) prints OTLP trace exports the same way, taken on gRPC (4317) and
// HTTP (the second port, 4318: /v1/traces and /v1/logs, protobuf bodies).
//
// Departures from the collector: its config file is not read (the sample's logs and
// traces pipelines, otlp to debug, are what it does); the sample's other receivers
// (opencensus, otlp/auth) are not served, and its traces pipeline's zipkin exporter (to
// zipkin.istio-system:9411) does not forward: the spans are printed only.
package otelcol

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/demoapp"
)

func init() { demoapp.RegisterOTelCollector(Serve) }

// Serve serves OTLP logs on the first listener until ctx ends, printing each export to
// os.Stdout; the other listeners (the sample's other receivers' ports) are closed. It
// owns the listeners.
func Serve(ctx context.Context, lns []net.Listener, pod string, log *slog.Logger) error {
	return serve(ctx, lns, pod, os.Stdout, log)
}

func serve(ctx context.Context, lns []net.Listener, pod string, out io.Writer, log *slog.Logger) error {
	if len(lns) == 0 {
		return fmt.Errorf("opentelemetry-collector: no port to take OTLP on")
	}
	var httpLn net.Listener
	if len(lns) > 1 {
		httpLn = lns[1]
	}
	for _, ln := range lns[min(len(lns), 2):] {
		_ = ln.Close()
	}
	p := newPrinter(out)
	logs := &logsServer{out: p}
	traces := func(req *coltrace.ExportTraceServiceRequest) { p.traces(req.GetResourceSpans(), time.Now()) }
	srv := grpc.NewServer()
	collogs.RegisterLogsServiceServer(srv, logs)
	coltrace.RegisterTraceServiceServer(srv, &tracesServer{sink: traces})
	h := otlpHTTP(traces, func(req *collogs.ExportLogsServiceRequest) { p.logs(req.GetResourceLogs(), time.Now()) })
	return serveGRPCAndHTTP(ctx, srv, lns[0], h, httpLn, log.With("pod", pod))
}

// logsServer is the otlp receiver of the logs pipeline.
type logsServer struct {
	collogs.UnimplementedLogsServiceServer
	out *printer
}

// Export prints the request as the debug exporter does and accepts every record.
func (s *logsServer) Export(_ context.Context, req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	s.out.logs(req.GetResourceLogs(), time.Now())
	return &collogs.ExportLogsServiceResponse{}, nil
}

// printer writes the debug exporter's lines, one export at a time.
type printer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newPrinter(w io.Writer) *printer { return &printer{w: bufio.NewWriter(w)} }

// logs prints one export as the debug exporter at verbosity detailed: the logger's
// summary line, then the records' text as otlptext marshals them, in one log entry.
func (p *printer) logs(rls []*logsv1.ResourceLogs, now time.Time) {
	records := 0
	for _, rl := range rls {
		for _, sl := range rl.GetScopeLogs() {
			records += len(sl.GetLogRecords())
		}
	}
	p.export(now, "Logs", "logs", fmt.Sprintf(`"resource logs": %d, "log records": %d`, len(rls), records), MarshalLogs(rls))
}

// export prints one export of signal as the debug exporter does: its summary line (the
// logger's message, e.g. "Logs", the exporter's fields for that signal and the counts),
// then text, in one log entry.
func (p *printer) export(now time.Time, message, signal, counts, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := now.UTC().Format("2006-01-02T15:04:05.000Z")
	fields := `{"otelcol.component.id": "debug", "otelcol.component.kind": "exporter", "otelcol.signal": "` + signal + `"`
	fmt.Fprintf(p.w, "%s\tinfo\t%s\t%s, %s}\n", ts, message, fields, counts)
	fmt.Fprintf(p.w, "%s\tinfo\t%s\t%s}\n", ts, text, fields)
	_ = p.w.Flush()
}

// otlpText builds the collector's otlptext form, a line at a time.
type otlpText struct{ strings.Builder }

func (t *otlpText) line(format string, a ...any) {
	fmt.Fprintf(&t.Builder, format, a...)
	t.WriteByte('\n')
}

// attrs writes header and one "->" line per attribute, nothing for none.
func (t *otlpText) attrs(header string, kvs []*commonv1.KeyValue) {
	if len(kvs) == 0 {
		return
	}
	t.line("%s:", header)
	for _, kv := range kvs {
		t.line("     -> %s: %s", kv.GetKey(), valueString(kv.GetValue()))
	}
}

// MarshalLogs is the collector's otlptext form of resource logs (the debug exporter's
// detailed verbosity).
func MarshalLogs(rls []*logsv1.ResourceLogs) string {
	var b otlpText
	line, attrs := b.line, b.attrs
	for i, rl := range rls {
		line("ResourceLog #%d", i)
		line("Resource SchemaURL: %s", rl.GetSchemaUrl())
		attrs("Resource attributes", rl.GetResource().GetAttributes())
		for j, sl := range rl.GetScopeLogs() {
			line("ScopeLogs #%d", j)
			line("ScopeLogs SchemaURL: %s", sl.GetSchemaUrl())
			line("InstrumentationScope %s %s", sl.GetScope().GetName(), sl.GetScope().GetVersion())
			attrs("InstrumentationScope attributes", sl.GetScope().GetAttributes())
			for k, lr := range sl.GetLogRecords() {
				line("LogRecord #%d", k)
				line("ObservedTimestamp: %s", timestamp(lr.GetObservedTimeUnixNano()))
				line("Timestamp: %s", timestamp(lr.GetTimeUnixNano()))
				line("SeverityText: %s", lr.GetSeverityText())
				line("SeverityNumber: %s(%d)", severity(lr.GetSeverityNumber()), int32(lr.GetSeverityNumber()))
				if lr.GetEventName() != "" {
					line("EventName: %s", lr.GetEventName())
				}
				line("Body: %s", valueString(lr.GetBody()))
				attrs("Attributes", lr.GetAttributes())
				line("Trace ID: %s", hexID(lr.GetTraceId()))
				line("Span ID: %s", hexID(lr.GetSpanId()))
				line("Flags: %d", lr.GetFlags())
			}
		}
	}
	return b.String()
}

// timestamp is pcommon.Timestamp's String: the UTC time of nanoseconds since the epoch.
func timestamp(ns uint64) string {
	return time.Unix(0, int64(ns)).UTC().String() //nolint:gosec // OTLP times fit int64 until 2262
}

// hexID is a trace or span id as pcommon prints it: hex, empty for none (all zeros).
func hexID(id []byte) string {
	for _, c := range id {
		if c != 0 {
			return hex.EncodeToString(id)
		}
	}
	return ""
}

// severity is plog.SeverityNumber's String.
func severity(n logsv1.SeverityNumber) string {
	names := []string{"Unspecified", "Trace", "Trace2", "Trace3", "Trace4", "Debug", "Debug2", "Debug3", "Debug4",
		"Info", "Info2", "Info3", "Info4", "Warn", "Warn2", "Warn3", "Warn4", "Error", "Error2", "Error3", "Error4",
		"Fatal", "Fatal2", "Fatal3", "Fatal4"}
	if int(n) >= 0 && int(n) < len(names) {
		return names[n]
	}
	return ""
}

// valueString is the debug exporter's valueToString: the type, then the value as a
// string in parentheses.
func valueString(v *commonv1.AnyValue) string {
	typ, s := valueParts(v)
	return typ + "(" + s + ")"
}

func valueParts(v *commonv1.AnyValue) (typ, s string) {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return "Str", x.StringValue
	case *commonv1.AnyValue_BoolValue:
		return "Bool", strconv.FormatBool(x.BoolValue)
	case *commonv1.AnyValue_IntValue:
		return "Int", strconv.FormatInt(x.IntValue, 10)
	case *commonv1.AnyValue_DoubleValue:
		return "Double", strconv.FormatFloat(x.DoubleValue, 'f', -1, 64)
	case *commonv1.AnyValue_BytesValue:
		return "Bytes", base64.StdEncoding.EncodeToString(x.BytesValue)
	case *commonv1.AnyValue_ArrayValue:
		parts := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, jsonValue(e))
		}
		return "Slice", "[" + strings.Join(parts, ",") + "]"
	case *commonv1.AnyValue_KvlistValue:
		return "Map", jsonMap(x.KvlistValue.GetValues())
	}
	return "Empty", ""
}

// jsonValue and jsonMap are pcommon's AsString of nested values: JSON.
func jsonValue(v *commonv1.AnyValue) string {
	typ, s := valueParts(v)
	switch typ {
	case "Str", "Bytes":
		return strconv.Quote(s)
	case "Empty":
		return "null"
	}
	return s
}

func jsonMap(kvs []*commonv1.KeyValue) string {
	sorted := append([]*commonv1.KeyValue(nil), kvs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].GetKey() < sorted[j].GetKey() })
	parts := make([]string, 0, len(sorted))
	for _, kv := range sorted {
		parts = append(parts, strconv.Quote(kv.GetKey())+":"+jsonValue(kv.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
