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

// An ambient pod's trace shows istio-cni's in-pod rule, then ztunnel's two sides with
// HBONE, the peers' identities, the L4 policy's verdict and ztunnel's access log lines.
func TestPrintTraceAmbient(t *testing.T) {
	ms := func(n int) *int { return &n }
	res := api.TraceResult{Pod: "curl-5f9cc9ddf9-65db7", URL: "http://productpage:9080/productpage", RequestID: "meshlab-trace-2", Address: "10.96.0.12:9080",
		Status: 200, DurationMs: 6.1, Hops: []api.TraceHop{
			{Kind: api.HopCapture, Pod: "curl-5f9cc9ddf9-65db7", Notes: "istio-cni's in-pod rules (nat ISTIO_OUTPUT) redirect the app's connection to ztunnel's 15001",
				Rules: []api.TraceRule{{Table: "nat", Chain: "ISTIO_OUTPUT", Packets: 1, Comment: "all other outbound TCP not from the node proxy goes to its outbound port 15001"}}},
			{Kind: api.HopZtunnel, Pod: "ztunnel-x2b9q.istio-system", Direction: "outbound", Listener: &api.TraceResource{Name: "outbound 15001 (in curl-5f9cc9ddf9-65db7's network namespace)"},
				Protocol: "HBONE", Endpoint: "10.244.0.7:15008", Target: "10.244.0.7:9080", MTLS: true, PeerIdentity: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage",
				DurationMs: ms(5), AccessLog: "2026-11-28T20:00:00.000000Z\tinfo\taccess\tconnection complete\tsrc.addr=10.244.0.9:41000 direction=\"outbound\""},
			{Kind: api.HopCapture, Pod: "productpage-v1-7c4b99cd-x7z2b"},
			{Kind: api.HopZtunnel, Pod: "ztunnel-x2b9q.istio-system", Direction: "inbound", Listener: &api.TraceResource{Name: "inbound 15008 (HBONE) (in productpage-v1-7c4b99cd-x7z2b's network namespace)"},
				Protocol: "HBONE", Endpoint: "10.244.0.7:9080", MTLS: true, PeerIdentity: "spiffe://cluster.local/ns/default/sa/curl", RBAC: "allowed"},
			{Kind: api.HopApp, Pod: "productpage-v1-7c4b99cd-x7z2b", Status: 200},
		}}
	var b strings.Builder
	if err := printTrace(&b, res); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "trace-ambient", []byte(b.String()))
}
