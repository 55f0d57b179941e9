package agent

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/internal/testutil"
)

// startDNS serves the name table on random loopback ports and returns the UDP and TCP
// addresses.
func startDNS(t *testing.T, names map[string][]netip.Addr) (udpAddr, tcpAddr string) {
	t.Helper()
	store := &nameStore{}
	store.set(agentapi.NameTable{Version: 1, Names: names})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeDNS(ctx, pc, ln, &dnsHandler{names: store, log: testutil.Logger(t)}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeDNS: %v", err)
		}
	})
	return pc.LocalAddr().String(), ln.Addr().String()
}

func TestDNSProxy(t *testing.T) {
	udp, tcp := startDNS(t, map[string][]netip.Addr{
		"reviews.default.svc.cluster.local": {netip.MustParseAddr("10.96.0.20")},
		"reviews":                           {netip.MustParseAddr("10.96.0.20")},
		"Multi.Default.":                    {netip.MustParseAddr("10.96.0.30"), netip.MustParseAddr("10.96.0.31")},
		"dual":                              {netip.MustParseAddr("10.96.0.40"), netip.MustParseAddr("fd00::40")},
	})
	for _, tc := range []struct {
		name    string
		net     string // "udp" or "tcp"
		qname   string
		qtype   uint16
		rcode   int
		answers []string
	}{
		{name: "A", net: "udp", qname: "reviews.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: []string{"10.96.0.20"}},
		{name: "A over TCP", net: "tcp", qname: "reviews.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: []string{"10.96.0.20"}},
		{name: "short name", net: "udp", qname: "reviews.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: []string{"10.96.0.20"}},
		{name: "case insensitive", net: "udp", qname: "REVIEWS.Default.SVC.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: []string{"10.96.0.20"}},
		{name: "table names normalised", net: "udp", qname: "multi.default.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: []string{"10.96.0.30", "10.96.0.31"}},
		{name: "AAAA of a v4 service", net: "udp", qname: "reviews.", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess},
		{name: "AAAA of a dual service", net: "tcp", qname: "dual.", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess, answers: []string{"fd00::40"}},
		{name: "other type of a known name", net: "udp", qname: "reviews.", qtype: dns.TypeMX, rcode: dns.RcodeSuccess},
		{name: "unknown name", net: "udp", qname: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "unknown name over TCP", net: "tcp", qname: "ratings.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "search suffix is the client's job", net: "udp", qname: "reviews.default.svc.cluster.local.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := udp
			if tc.net == "tcp" {
				addr = tcp
			}
			c := &dns.Client{Net: tc.net, Timeout: 2 * time.Second}
			m := new(dns.Msg)
			m.SetQuestion(tc.qname, tc.qtype)
			in, _, err := c.Exchange(m, addr)
			if err != nil {
				t.Fatal(err)
			}
			if in.Rcode != tc.rcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[in.Rcode], dns.RcodeToString[tc.rcode])
			}
			if !in.Authoritative || in.RecursionAvailable {
				t.Errorf("aa=%t ra=%t, want an authoritative answer without recursion", in.Authoritative, in.RecursionAvailable)
			}
			var got []string
			for _, rr := range in.Answer {
				if rr.Header().Ttl != 30 || rr.Header().Name != tc.qname {
					t.Errorf("answer header %v, want TTL 30 for %s", rr.Header(), tc.qname)
				}
				switch rr := rr.(type) {
				case *dns.A:
					got = append(got, rr.A.String())
				case *dns.AAAA:
					got = append(got, rr.AAAA.String())
				default:
					t.Errorf("unexpected record %v", rr)
				}
			}
			if len(got) != len(tc.answers) {
				t.Fatalf("answers = %q, want %q", got, tc.answers)
			}
			for i := range got {
				if got[i] != tc.answers[i] {
					t.Errorf("answers = %q, want %q", got, tc.answers)
				}
			}
		})
	}
}

// TestDNSNeverForwards pins that the proxy, which has no upstream by construction,
// answers unknown names NXDOMAIN itself even when recursion is desired, and that a
// resolver listening on loopback meanwhile receives nothing.
func TestDNSNeverForwards(t *testing.T) {
	trap, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	trapDone := make(chan struct{})
	go func() {
		defer close(trapDone)
		buf := make([]byte, 512)
		for {
			if _, _, err := trap.ReadFrom(buf); err != nil {
				return
			}
			seen.Add(1)
		}
	}()
	t.Cleanup(func() { trap.Close(); <-trapDone })

	udp, _ := startDNS(t, nil)
	for _, name := range []string{"example.com.", "localhost.", "kubernetes.default.svc.cluster.local.", "."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.RecursionDesired = true
		in, err := dns.Exchange(m, udp)
		if err != nil {
			t.Fatal(err)
		}
		if in.Rcode != dns.RcodeNameError || len(in.Answer) != 0 || in.RecursionAvailable {
			t.Errorf("%s: %v", name, in)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("%d queries reached another resolver", n)
	}
}

func TestDNSRejectsMalformedQueries(t *testing.T) {
	h := &dnsHandler{names: &nameStore{}, log: testutil.Logger(t)}
	m := new(dns.Msg)
	m.SetQuestion("a.", dns.TypeA)
	m.Question = append(m.Question, dns.Question{Name: "b.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if r := h.answer(m); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: rcode %s", dns.RcodeToString[r.Rcode])
	}
	m = new(dns.Msg)
	m.SetNotify("a.")
	if r := h.answer(m); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("notify: rcode %s", dns.RcodeToString[r.Rcode])
	}
}

// TestDNSWaitsForTheFirstNameTable asks for a name before the agent has its first name
// table, as a proxy resolving a STRICT_DNS cluster right after start does: the answer
// waits for the table instead of saying NXDOMAIN (which would leave the cluster without
// hosts until its next refresh).
func TestDNSWaitsForTheFirstNameTable(t *testing.T) {
	t.Parallel()
	store := &nameStore{}
	h := &dnsHandler{names: store, log: testutil.Logger(t)}
	go func() {
		time.Sleep(50 * time.Millisecond)
		store.set(agentapi.NameTable{Version: 1, Names: map[string][]netip.Addr{"edition.cnn.com": {netip.MustParseAddr("240.240.0.1")}}})
	}()
	m := new(dns.Msg)
	m.SetQuestion("edition.cnn.com.", dns.TypeA)
	r := h.answer(m)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("answer before the first table: rcode %s, %d answers; want the address once the table came", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	// With a table, an unknown name is NXDOMAIN at once.
	start := time.Now()
	m.SetQuestion("unknown.example.", dns.TypeA)
	if r := h.answer(m); r.Rcode != dns.RcodeNameError || time.Since(start) > time.Second {
		t.Errorf("unknown name with a table: rcode %s after %v", dns.RcodeToString[r.Rcode], time.Since(start))
	}
}
