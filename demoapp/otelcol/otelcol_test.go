package otelcol

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func str(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// The collector's own test case (exporter/debugexporter/internal/otlptext/testdata/
// logs/one_record.out), printed as the collector prints it.
func TestMarshalLogsAsTheDebugExporter(t *testing.T) {
	t.Parallel()
	rls := []*logsv1.ResourceLogs{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{str("resource-attr", "resource-attr-val-1")}},
		ScopeLogs: []*logsv1.ScopeLogs{{
			Scope: &commonv1.InstrumentationScope{},
			LogRecords: []*logsv1.LogRecord{{
				TimeUnixNano:   uint64(time.Date(2020, 2, 11, 20, 26, 13, 789, time.UTC).UnixNano()),
				SeverityText:   "Info",
				SeverityNumber: logsv1.SeverityNumber_SEVERITY_NUMBER_INFO,
				Body:           &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "This is a log message"}},
				Attributes: []*commonv1.KeyValue{str("app", "server"),
					{Key: "instance_num", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 1}}}},
				TraceId: []byte{8, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
				SpanId:  []byte{1, 2, 4, 8, 0, 0, 0, 0},
			}},
		}},
	}}
	want := `ResourceLog #0
Resource SchemaURL: 
Resource attributes:
     -> resource-attr: Str(resource-attr-val-1)
ScopeLogs #0
ScopeLogs SchemaURL: 
InstrumentationScope  
LogRecord #0
ObservedTimestamp: 1970-01-01 00:00:00 +0000 UTC
Timestamp: 2020-02-11 20:26:13.000000789 +0000 UTC
SeverityText: Info
SeverityNumber: Info(9)
Body: Str(This is a log message)
Attributes:
     -> app: Str(server)
     -> instance_num: Int(1)
Trace ID: 08040201000000000000000000000000
Span ID: 0102040800000000
Flags: 0
`
	if got := MarshalLogs(rls); got != want {
		t.Errorf("MarshalLogs:\n%s\nwant (the collector's):\n%s", got, want)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An OTLP logs export over gRPC is accepted and printed.
func TestServeTakesOTLPLogs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() { done <- serve(ctx, []net.Listener{ln}, "otel-1", &out, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	body := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "8496" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local`
	_, err = collogs.NewLogsServiceClient(conn).Export(ctx, &collogs.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{
		ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: []*logsv1.LogRecord{{
			Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: body}},
		}}}},
	}}})
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	got := out.String()
	for _, want := range []string{"\tinfo\tLogs\t{", `"resource logs": 1, "log records": 1}`, "\tinfo\tResourceLog #0\n", "Body: Str(" + body + ")\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("printed:\n%s\nwant %q", got, want)
		}
	}
}
