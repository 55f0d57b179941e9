package demoapp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Spans posted as the proxies' Zipkin tracer posts them are found by Zipkin's and
// Jaeger's query APIs, joined by trace id, newest trace first.
func TestTraceStoreAPIs(t *testing.T) {
	t.Parallel()
	store := newSpanStore()
	zipkin := httptest.NewServer(zipkinAPI(store))
	defer zipkin.Close()
	jaeger := httptest.NewServer(jaegerAPI(store))
	defer jaeger.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	now := time.Now().UnixMicro()
	post := fmt.Sprintf(`[
{"traceId":"00000000000000aa463ac35c9f6413ad","id":"0000000000000001","kind":"CLIENT","name":"productpage.default.svc.cluster.local:9080/*","timestamp":%d,"duration":900,"localEndpoint":{"serviceName":"istio-ingressgateway.istio-system","ipv4":"10.244.0.2"},"tags":{"http.status_code":"200"}},
{"traceId":"00000000000000aa463ac35c9f6413ad","id":"0000000000000002","parentId":"0000000000000001","kind":"SERVER","name":"productpage.default.svc.cluster.local:9080/*","timestamp":%d,"duration":800,"localEndpoint":{"serviceName":"productpage.default","ipv4":"10.244.0.3"}},
{"traceId":"00000000000000aa463ac35c9f6413ad","id":"0000000000000003","parentId":"0000000000000002","kind":"CLIENT","name":"Details.default.svc.cluster.local:9080/*","timestamp":%d,"duration":100,"localEndpoint":{"serviceName":"productpage.default","ipv4":"10.244.0.3"}},
{"traceId":"00000000000000bb463ac35c9f6413ad","id":"0000000000000009","kind":"SERVER","name":"details.default.svc.cluster.local:9080/*","timestamp":%d,"duration":10,"localEndpoint":{"serviceName":"details.default"}}
]`, now-1000, now-900, now-500, now-100)
	resp, err := client.Post(zipkin.URL+"/api/v2/spans", "application/json", strings.NewReader(post))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST spans: %v %v", resp, err)
	}
	resp.Body.Close()
	get := func(url string, v any) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", url, resp, err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	var services []string
	get(zipkin.URL+"/api/v2/services", &services)
	if strings.Join(services, ",") != "details.default,istio-ingressgateway.istio-system,productpage.default" {
		t.Errorf("services %q", services)
	}
	var traces [][]zipkinSpan
	get(zipkin.URL+"/zipkin/api/v2/traces?serviceName=productpage.default&limit=10", &traces)
	if len(traces) != 1 || len(traces[0]) != 3 || traces[0][2].Name != "details.default.svc.cluster.local:9080/*" {
		t.Errorf("productpage's traces %+v, want the one trace of 3 spans, names lower-cased", traces)
	}
	get(zipkin.URL+"/api/v2/traces", &traces)
	if len(traces) != 2 || traces[0][0].TraceID != "00000000000000bb463ac35c9f6413ad" {
		t.Errorf("all traces %+v, want 2, newest first", traces)
	}
	var one []zipkinSpan
	get(zipkin.URL+"/api/v2/trace/00000000000000AA463ac35c9f6413ad", &one)
	if len(one) != 3 {
		t.Errorf("trace by id: %d spans", len(one))
	}
	var js struct {
		Data []jaegerTrace `json:"data"`
	}
	get(jaeger.URL+"/jaeger/api/traces?service=productpage.default&limit=20&lookback=1h", &js)
	if len(js.Data) != 1 || len(js.Data[0].Spans) != 3 || len(js.Data[0].Processes) != 2 {
		t.Fatalf("jaeger traces %+v", js.Data)
	}
	sp := js.Data[0].Spans[1]
	if sp.References[0].SpanID != "0000000000000001" || sp.References[0].RefType != "CHILD_OF" || js.Data[0].Processes[sp.ProcessID].ServiceName != "productpage.default" {
		t.Errorf("jaeger span %+v", sp)
	}
	var jsvc struct{ Data []string }
	get(jaeger.URL+"/jaeger/api/services", &jsvc)
	if len(jsvc.Data) != 3 {
		t.Errorf("jaeger services %q", jsvc.Data)
	}
	resp, err = client.Get(jaeger.URL + "/jaeger/api/traces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("jaeger traces without service: %d, want 400", resp.StatusCode)
	}
}

// FuzzZipkinQuery: no query string makes the trace search parameters panic.
func FuzzZipkinQuery(f *testing.F) {
	f.Add("serviceName=productpage.default&limit=10&lookback=3600000&endTs=1700000000000")
	f.Add("service=a&lookback=custom&start=5&end=9&limit=-1")
	f.Fuzz(func(t *testing.T, q string) {
		r := httptest.NewRequest(http.MethodGet, "/api/v2/traces", nil)
		r.URL.RawQuery = q
		if zq, err := zipkinQuery(r); err == nil && zq.limit < 0 {
			t.Fatalf("negative limit from %q", q)
		}
		_, _ = jaegerQuery(r)
	})
}
