package dns

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

func svc(ns, name, vip string, vis workload.Service_Visibility) *workload.Address {
	s := &workload.Service{Name: name, Namespace: ns, Hostname: name + "." + ns + ".svc.cluster.local", Visibility: vis}
	if vip != "" {
		s.Addresses = []*workload.NetworkAddress{{Address: netip.MustParseAddr(vip).AsSlice()}}
	}
	return &workload.Address{Type: &workload.Address_Service{Service: s}}
}

func TestAnswer(t *testing.T) {
	t.Parallel()
	st := state.New("n")
	st.ApplyAddresses([]*workload.Address{
		svc("default", "reviews", "10.96.0.10", workload.Service_PUBLIC),
		svc("other", "reviews", "10.96.0.20", workload.Service_PUBLIC),
		svc("other", "private", "10.96.0.30", workload.Service_NAMESPACE),
		{Type: &workload.Address_Service{Service: &workload.Service{Name: "ext", Namespace: "default", Hostname: "api.example.com",
			Addresses: []*workload.NetworkAddress{{Address: netip.MustParseAddr("240.240.0.1").AsSlice()}}}}},
		svc("default", "headless", "", workload.Service_PUBLIC),
		{Type: &workload.Address_Workload{Workload: &workload.Workload{Uid: "Kubernetes//Pod/default/h1", Name: "h1", Namespace: "default",
			Addresses: [][]byte{netip.MustParseAddr("10.0.0.7").AsSlice()},
			Services:  map[string]*workload.PortList{"default/headless.default.svc.cluster.local": {}}}}},
	}, nil)
	forwarded := 0
	reg := metrics.New()
	h := &Handler{Store: st, Namespace: "default", Log: slog.New(slog.DiscardHandler), Metrics: reg,
		Source: func() (string, string) { return "curl", "v1" },
		Forward: func(_ context.Context, _ string, q *dns.Msg) (*dns.Msg, error) {
			forwarded++
			if q.Question[0].Name == "fail." {
				return nil, errors.New("upstream down")
			}
			m := new(dns.Msg)
			m.SetRcode(q, dns.RcodeNameError)
			return m, nil
		}}
	cases := []struct {
		name, q  string
		qtype    uint16
		want     string // the A record's address, "" for none
		rcode    int
		forwards bool
	}{
		{"fqdn", "reviews.default.svc.cluster.local.", dns.TypeA, "10.96.0.10", dns.RcodeSuccess, false},
		{"short name: the client's namespace", "reviews.", dns.TypeA, "10.96.0.10", dns.RcodeSuccess, false},
		{"name.namespace", "reviews.other.", dns.TypeA, "10.96.0.20", dns.RcodeSuccess, false},
		{"name.namespace.svc", "reviews.other.svc.", dns.TypeA, "10.96.0.20", dns.RcodeSuccess, false},
		{"a namespace-visible service of another namespace is forwarded", "private.other.svc.cluster.local.", dns.TypeA, "", dns.RcodeNameError, true},
		{"a ServiceEntry host", "api.example.com.", dns.TypeA, "240.240.0.1", dns.RcodeSuccess, false},
		{"AAAA of a v4-only service is empty, not forwarded", "reviews.", dns.TypeAAAA, "", dns.RcodeSuccess, false},
		{"headless: the endpoints", "headless.", dns.TypeA, "10.0.0.7", dns.RcodeSuccess, false},
		{"unknown names go upstream", "www.google.com.", dns.TypeA, "", dns.RcodeNameError, true},
		{"upstream failure is SERVFAIL", "fail.", dns.TypeA, "", dns.RcodeServerFailure, true},
	}
	for _, tc := range cases {
		before := forwarded
		q := new(dns.Msg)
		q.SetQuestion(tc.q, tc.qtype)
		m := h.Answer("udp", q)
		if m.Rcode != tc.rcode {
			t.Errorf("%s: rcode %s, want %s", tc.name, dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
		}
		got := ""
		if len(m.Answer) > 0 {
			if a, ok := m.Answer[0].(*dns.A); ok {
				got = a.A.String()
			}
		}
		if got != tc.want {
			t.Errorf("%s: answer %q, want %q", tc.name, got, tc.want)
		}
		if (forwarded > before) != tc.forwards {
			t.Errorf("%s: forwarded = %v, want %v", tc.name, forwarded > before, tc.forwards)
		}
		if m.Id != q.Id {
			t.Errorf("%s: id %d, want %d", tc.name, m.Id, q.Id)
		}
	}
	// ztunnel's DNS counters: every query, the forwarded ones, the one that failed.
	var text strings.Builder
	if err := reg.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	src := `source_canonical_service="curl",source_canonical_revision="v1"`
	for _, want := range []string{
		`istio_dns_requests_total{request_query_type="a",request_protocol="udp",` + src + `} 9`,
		`istio_dns_requests_total{request_query_type="aaaa",request_protocol="udp",` + src + `} 1`,
		`istio_dns_upstream_requests_total{request_query_type="a",request_protocol="udp",` + src + `} 3`,
		`istio_dns_upstream_failures_total{request_query_type="a",request_protocol="udp",` + src + `} 1`,
	} {
		if !strings.Contains(text.String(), want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, text.String())
		}
	}
}
