package observe

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

func TestEdgesFromStatsMTLSAndDenials(t *testing.T) {
	const host = "backend.default.svc.cluster.local"
	stats := map[string]uint64{
		"cluster.outbound|8080||" + host + ".upstream_rq_total":                                      5,
		"cluster.outbound|8080||" + host + ".upstream_rq_403":                                        2,
		"cluster.outbound|8080||" + host + ".tlsMode-istio.total_match_count":                        2,
		"cluster.outbound|9090||legacy.default.svc.cluster.local.upstream_rq_total":                  1,
		"cluster.outbound|9090||legacy.default.svc.cluster.local.tlsMode-disabled.total_match_count": 1,
		"cluster.outbound|9090||mixed.default.svc.cluster.local.tlsMode-istio.total_match_count":     1,
		"cluster.outbound|9090||mixed.default.svc.cluster.local.tlsMode-disabled.total_match_count":  1,
		"http.inbound_0.0.0.0_8080.rbac.denied":                                                      3,
		"http.inbound_0.0.0.0_8080.rbac.shadow_denied":                                               9,
		"tcp.rbac.denied":                        1,
		"http.inbound_0.0.0.0_8080.rbac.allowed": 7,
	}
	got := edgesFromStats(stats)
	if e := got[host]; e != (edgeCounters{requests: 5, denied: 2, mtlsMatches: 2}) || !e.mtls() {
		t.Errorf("backend edge = %+v (mtls %v); want 5 requests, 2 denied, mTLS by its socket match", e, e.mtls())
	}
	if e := got["legacy.default.svc.cluster.local"]; e.mtls() || e.rawMatches != 1 {
		t.Errorf("legacy edge = %+v; want plaintext", e)
	}
	if e := got["mixed.default.svc.cluster.local"]; e.mtls() {
		t.Errorf("an edge with plaintext endpoints is not mTLS: %+v", e)
	}
	if e := (edgeCounters{handshakes: 1, rawMatches: 1}); !e.mtls() {
		t.Error("an edge with TLS handshakes is mTLS")
	}
	if n := rbacDenied(stats); n != 4 {
		t.Errorf("rbacDenied = %d, want 4 (http and tcp denials, not shadow ones)", n)
	}
}

func TestTopologyCarriesMTLSAndDenials(t *testing.T) {
	m := hello() // pods sorted: backend-v1, frontend-v1
	host := "backend.default.svc.cluster.local"
	samples := []podSample{
		{rbacDenied: 2},
		{edges: map[string]edgeCounters{host: {requests: 4, denied: 2, handshakes: 1, mtlsMatches: 1}}},
	}
	top := buildTopology(m, samples)
	if len(top.Edges) != 1 {
		t.Fatalf("edges = %+v", top.Edges)
	}
	e := top.Edges[0]
	if !e.MTLS || e.Denied != 2 || e.Handshakes != 1 || e.MTLSEndpoints != 1 || e.PlaintextEndpoints != 0 {
		t.Errorf("edge = %+v; want mTLS with 2 denied", e)
	}
	if top.Pods[0].Name != "backend-v1" || top.Pods[0].RBACDenied != 2 {
		t.Errorf("pods = %+v; want backend-v1 with 2 RBAC denials", top.Pods)
	}
}

func TestCertChangeEvents(t *testing.T) {
	d := &fakeDeps{}
	var p Topology
	m := hello() // backend-v1, frontend-v1
	sample := func(be, fe string) []podSample {
		st := func(serial string) *agentapi.Status {
			return &agentapi.Status{Cert: &agentapi.CertStatus{SPIFFEID: "spiffe://cluster.local/ns/default/sa/x", Serial: serial, NotAfter: time.Unix(2e9, 0)}}
		}
		return []podSample{{status: st(be)}, {status: st(fe)}}
	}
	p.publishCertChanges(d, m, sample("a1", "")) // the first sample only records
	p.publishCertChanges(d, m, sample("a1", "b1"))
	p.publishCertChanges(d, m, sample("a2", "b1"))
	p.publishCertChanges(d, m, sample("a2", "b1"))
	var got []string
	for _, e := range d.events {
		got = append(got, e.Kind+" "+e.Pod+" "+e.Message)
	}
	want := []string{
		"cert.issued frontend-v1 certificate b1 issued for spiffe://cluster.local/ns/default/sa/x",
		"cert.rotated backend-v1 certificate rotated: a1 -> a2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
