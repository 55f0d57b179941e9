package otelcol

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// pageSpan is the opentelemetry page's example span: productpage's egress to reviews.
func pageSpans() []*tracev1.ResourceSpans {
	start := time.Date(2024, 1, 30, 15, 57, 58, 588041000, time.UTC)
	return []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{str("service.name", "productpage.default")}},
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
			TraceId: []byte{0x79, 0xfb, 0x7b, 0x59, 0xc1, 0xc3, 0xa5, 0x18, 0x75, 0x0a, 0x5d, 0x6d, 0xad, 0x7c, 0xd2, 0xd1},
			SpanId:  []byte{0x2d, 0xff, 0x26, 0xf3, 0xb4, 0xd6, 0xd2, 0x0f}, ParentSpanId: []byte{0x0c, 0xf7, 0x92, 0xb0, 0x61, 0xf0, 0xad, 0x51},
			Name: "egress reviews:9080", Kind: tracev1.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(863075 * time.Microsecond).UnixNano()),
			Status:     &tracev1.Status{},
			Attributes: []*commonv1.KeyValue{str("node_id", "sidecar~10.244.0.8~productpage-v1-564d4686f-t6s4m.default~default.svc.cluster.local"), str("zone", ""), str("my-attribute", "default-value")},
		}}}},
	}}
}

// The debug exporter's detailed form of the page's span.
func TestMarshalTracesAsTheDebugExporter(t *testing.T) {
	t.Parallel()
	const want = `ResourceSpans #0
Resource SchemaURL: 
Resource attributes:
     -> service.name: Str(productpage.default)
ScopeSpans #0
ScopeSpans SchemaURL: 
InstrumentationScope  
Span #0
    Trace ID       : 79fb7b59c1c3a518750a5d6dad7cd2d1
    Parent ID      : 0cf792b061f0ad51
    ID             : 2dff26f3b4d6d20f
    Name           : egress reviews:9080
    Kind           : Client
    Start time     : 2024-01-30 15:57:58.588041 +0000 UTC
    End time       : 2024-01-30 15:57:59.451116 +0000 UTC
    Status code    : Unset
    Status message : 
Attributes:
     -> node_id: Str(sidecar~10.244.0.8~productpage-v1-564d4686f-t6s4m.default~default.svc.cluster.local)
     -> zone: Str()
     -> my-attribute: Str(default-value)
`
	if got := MarshalTraces(pageSpans()); got != want {
		t.Errorf("MarshalTraces:\n%s\nwant (the collector's):\n%s", got, want)
	}
}

// The collector takes trace exports on its gRPC port and on its HTTP port's /v1/traces
// (protobuf; JSON is answered 415), and prints each.
func TestServeTakesOTLPTracesOverGRPCAndHTTP(t *testing.T) {
	t.Parallel()
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() { done <- serve(ctx, lns, "otel-1", &out, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lns[0].Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := coltrace.NewTraceServiceClient(conn).Export(ctx, &coltrace.ExportTraceServiceRequest{ResourceSpans: pageSpans()}); err != nil {
		t.Fatalf("gRPC Export: %v", err)
	}
	body, _ := proto.Marshal(&coltrace.ExportTraceServiceRequest{ResourceSpans: pageSpans()})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Post("http://"+lns[1].Addr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("HTTP export: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = client.Post("http://"+lns[1].Addr().String()+"/v1/traces", "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("JSON export: %v %v, want 415", resp, err)
	}
	resp.Body.Close()
	got := out.String()
	if n := strings.Count(got, "\tinfo\tTraces\t{\"otelcol.component.id\": \"debug\", \"otelcol.component.kind\": \"exporter\", \"otelcol.signal\": \"traces\", \"resource spans\": 1, \"spans\": 1}\n"); n != 2 {
		t.Errorf("printed %d Traces summaries, want 2:\n%s", n, got)
	}
	if n := strings.Count(got, "    Name           : egress reviews:9080\n"); n != 2 {
		t.Errorf("printed the span %d times, want 2:\n%s", n, got)
	}
}

// Jaeger's receiver turns OTLP spans into the store's Zipkin form: service from the
// resource, kind, microsecond times, attributes as tags.
func TestZipkinSpansFromOTLP(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(zipkinSpans(pageSpans()))
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"traceId":"79fb7b59c1c3a518750a5d6dad7cd2d1","parentId":"0cf792b061f0ad51","id":"2dff26f3b4d6d20f","kind":"CLIENT","name":"egress reviews:9080","timestamp":1706630278588041,"duration":863075,"localEndpoint":{"serviceName":"productpage.default"},"tags":{"my-attribute":"default-value","node_id":"sidecar~10.244.0.8~productpage-v1-564d4686f-t6s4m.default~default.svc.cluster.local","zone":""}}]`
	if string(b) != want {
		t.Errorf("zipkinSpans:\n%s\nwant\n%s", b, want)
	}
}
