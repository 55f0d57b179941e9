package main

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestPrintTraceShowsEachProxysAccessLog pins the text view of a trace: each sidecar hop
// with its resources, then the duration and response flags its access log recorded and
// the line itself; a hop without access log lines (logs off) shows none of the three.
func TestPrintTraceShowsEachProxysAccessLog(t *testing.T) {
	ms := func(n int) *int { return &n }
	res := api.TraceResult{Pod: "frontend-v1", URL: "http://backend:8080/", RequestID: "meshlab-trace-1", Address: "10.96.0.10:8080",
		Status: 200, DurationMs: 3.2, Hops: []api.TraceHop{
			{Kind: api.HopCapture, Pod: "frontend-v1", Rules: []api.TraceRule{{Table: "nat", Chain: "ISTIO_OUTPUT", Packets: 1, Comment: "redirect app traffic to the sidecar"}}},
			{Kind: api.HopProxy, Pod: "frontend-v1", Direction: "outbound",
				Listener: &api.TraceResource{Name: "0.0.0.0_8080"}, Cluster: &api.TraceResource{Name: "outbound|8080||backend.default.svc.cluster.local"},
				Endpoint: "10.0.0.3:8080", MTLS: true, PeerIdentity: "spiffe://cluster.local/ns/default/sa/backend",
				DurationMs: ms(2), ResponseFlags: "-",
				AccessLog: `[2026-01-02T03:04:05.678Z] "GET / HTTP/1.1" 200 - via_upstream - "-" 0 2 2 1 "-" "curl/8" "meshlab-trace-1" "backend:8080" "10.0.0.3:8080" outbound|8080||backend.default.svc.cluster.local 10.0.0.2:41000 10.96.0.10:8080 10.0.0.2:40000 - default` + "\n"},
			{Kind: api.HopProxy, Pod: "backend-v1", Direction: "inbound", FilterChain: &api.TraceResource{Name: "0.0.0.0_8080"}, MTLS: true,
				PeerIdentity: "spiffe://cluster.local/ns/default/sa/frontend", DurationMs: ms(0), ResponseFlags: "UF"},
			{Kind: api.HopProxy, Pod: "backend-v2", Direction: "inbound"},
			{Kind: api.HopApp, Pod: "backend-v1", Status: 200, Version: "v1"},
		}}
	var b strings.Builder
	if err := printTrace(&b, res); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "trace-access-log", []byte(b.String()))
}
