package otelcol

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
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
	"google.golang.org/protobuf/encoding/protojson"
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

// pageSpansJSON is pageSpans as OTLP/JSON (the specification's encoding: hex ids, the
// kind as a number, times as a number and a string, an unknown field to ignore).
const pageSpansJSON = `{"resourceSpans": [{
  "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "productpage.default"}}]},
  "scopeSpans": [{"spans": [{
    "traceId": "79FB7B59C1C3A518750A5D6DAD7CD2D1", "spanId": "2dff26f3b4d6d20f", "parentSpanId": "0cf792b061f0ad51",
    "name": "egress reviews:9080", "kind": 3,
    "startTimeUnixNano": 1706630278588041000, "endTimeUnixNano": "1706630279451116000",
    "status": {}, "futureField": {"a": 1},
    "attributes": [
      {"key": "node_id", "value": {"stringValue": "sidecar~10.244.0.8~productpage-v1-564d4686f-t6s4m.default~default.svc.cluster.local"}},
      {"key": "zone", "value": {"stringValue": ""}},
      {"key": "my-attribute", "value": {"stringValue": "default-value"}}
    ]
  }]}]
}]}`

// OTLP/JSON decodes to the same request as its protobuf.
func TestUnmarshalOTLPJSON(t *testing.T) {
	t.Parallel()
	got := &coltrace.ExportTraceServiceRequest{}
	if err := unmarshalOTLPJSON([]byte(pageSpansJSON), got); err != nil {
		t.Fatal(err)
	}
	if want := (&coltrace.ExportTraceServiceRequest{ResourceSpans: pageSpans()}); !proto.Equal(got, want) {
		t.Errorf("decoded %v\nwant %v", got, want)
	}
	for _, bad := range []string{`[]`, `{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "2dff26f3"}]}]}]}`, `{} {}`, `{"resourceSpans": 1}`} {
		if err := unmarshalOTLPJSON([]byte(bad), &coltrace.ExportTraceServiceRequest{}); err == nil {
			t.Errorf("%s: decoded, want an error", bad)
		}
	}
}

// FuzzOTLPJSON: the OTLP/JSON reader never panics, and what it takes round-trips: the
// request it decodes, written back as OTLP/JSON, decodes to the same request.
func FuzzOTLPJSON(f *testing.F) {
	for _, s := range []string{pageSpansJSON, `{}`, `{"resourceSpans": []}`, `{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": ""}]}]}]}`, `[`, `{"a": {"spanId": 5}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := &coltrace.ExportTraceServiceRequest{}
		if err := unmarshalOTLPJSON([]byte(body), req); err != nil {
			return
		}
		b, err := protojson.Marshal(req)
		if err != nil {
			t.Fatalf("%q: decoded %v, which does not marshal: %v", body, req, err)
		}
		// protojson writes ids in base64: make them the specification's hex again.
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		base64ToHex(t, v)
		b, _ = json.Marshal(v)
		again := &coltrace.ExportTraceServiceRequest{}
		if err := unmarshalOTLPJSON(b, again); err != nil || !proto.Equal(req, again) {
			t.Fatalf("%q: decoded %v; its OTLP/JSON %s decodes to %v (%v)", body, req, b, again, err)
		}
	})
}

// base64ToHex rewrites protojson's base64 ids in v as OTLP/JSON's hex.
func base64ToHex(t *testing.T, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && otlpIDLen[k] != 0 {
				id, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatalf("%s: %q: %v", k, s, err)
				}
				x[k] = hex.EncodeToString(id)
				continue
			}
			base64ToHex(t, e)
		}
	case []any:
		for _, e := range x {
			base64ToHex(t, e)
		}
	}
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
// (protobuf and JSON; another Content-Type is answered 415), and prints each.
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
	// OTLP/JSON (hex ids, enum numbers, 64-bit times as numbers or strings) is taken
	// and answered in JSON, as the collector's receiver does; another type is 415.
	resp, err = client.Post("http://"+lns[1].Addr().String()+"/v1/traces", "application/json; charset=utf-8", strings.NewReader(pageSpansJSON))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON export: %v %v", resp, err)
	}
	if b, _ := io.ReadAll(resp.Body); strings.TrimSpace(string(b)) != "{}" {
		t.Errorf("JSON export answered %q, want {}", b)
	}
	resp.Body.Close()
	// gzip, as the collector's confighttp takes it; another encoding is refused.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(pageSpansJSON))
	_ = zw.Close()
	for enc, want := range map[string]int{"gzip": http.StatusOK, "zstd": http.StatusBadRequest} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+lns[1].Addr().String()+"/v1/traces", bytes.NewReader(gz.Bytes()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", enc)
		resp, err = client.Do(req)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s export: %v %v, want %d", enc, resp, err, want)
		}
		resp.Body.Close()
	}
	for ct, want := range map[string]int{"text/plain": http.StatusUnsupportedMediaType, "application/json": http.StatusBadRequest} {
		resp, err = client.Post("http://"+lns[1].Addr().String()+"/v1/traces", ct, strings.NewReader(`{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}`))
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s export of a bad id: %v %v, want %d", ct, resp, err, want)
		}
		resp.Body.Close()
	}
	got := out.String()
	if n := strings.Count(got, "\tinfo\tTraces\t{\"otelcol.component.id\": \"debug\", \"otelcol.component.kind\": \"exporter\", \"otelcol.signal\": \"traces\", \"resource spans\": 1, \"spans\": 1}\n"); n != 4 {
		t.Errorf("printed %d Traces summaries, want 4:\n%s", n, got)
	}
	if n := strings.Count(got, MarshalTraces(pageSpans())); n != 4 {
		t.Errorf("printed the page's span %d times, want 4 (gRPC, protobuf, JSON, gzipped JSON):\n%s", n, got)
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

// Jaeger's OTLP/HTTP receiver stores an OTLP/JSON export as it stores its protobuf: the
// page's span in the Zipkin form, ids in hex.
func TestJaegerTakesOTLPJSON(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stored := make(chan []byte, 1)
	done := make(chan error, 1)
	go func() {
		done <- ServeOTLPTraces(ctx, nil, ln, func(b []byte) error { stored <- b; return nil }, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeOTLPTraces: %v", err)
		}
	})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Post("http://"+ln.Addr().String()+"/v1/traces", "application/json", strings.NewReader(pageSpansJSON))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("JSON export: %v %v", resp, err)
	}
	resp.Body.Close()
	want, err := json.Marshal(zipkinSpans(pageSpans()))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-stored:
		if !bytes.Equal(got, want) {
			t.Errorf("stored %s\nwant %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing stored")
	}
}
