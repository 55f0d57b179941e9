package lab

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestKubeDNSAnswersAsClusterDNS(t *testing.T) {
	t.Parallel()
	svc := func(name, ns, vip string) *model.Service {
		return &model.Service{Name: name, Namespace: ns, VIP: netip.MustParseAddr(vip), Selector: map[string]string{"app": name}}
	}
	k := newKubeDNS(model.New([]*model.Service{
		svc("httpbin", "foo", "10.96.0.10"),
		svc("httpbin", "bar", "10.96.0.11"),
		svc("reviews", "default", "10.96.0.12"),
	}, nil), testutil.Logger(t))
	for _, tt := range []struct {
		ns, name string
		want     string // "" for NXDOMAIN
	}{
		{"legacy", "httpbin.foo.svc.cluster.local.", "10.96.0.10"},
		{"legacy", "httpbin.bar.svc.cluster.local", "10.96.0.11"},
		{"foo", "httpbin.", "10.96.0.10"},            // <ns>.svc.cluster.local from the search list
		{"bar", "HTTPBIN", "10.96.0.11"},             // names are case-insensitive
		{"legacy", "httpbin.foo.", "10.96.0.10"},     // svc.cluster.local from the search list
		{"legacy", "httpbin.foo.svc.", "10.96.0.10"}, // cluster.local from the search list
		{"legacy", "httpbin.", ""},                   // no httpbin in legacy
		{"default", "reviews.default.svc.cluster.local", "10.96.0.12"},
		{"default", "httpbin.org.", ""}, // never forwarded
		{"default", "a.b.httpbin.foo.svc.cluster.local", ""},
	} {
		got, ok := k.lookup(tt.ns, tt.name)
		if (tt.want == "") == ok || ok && got.String() != tt.want {
			t.Errorf("lookup(%s, %q) = %v, %v; want %q", tt.ns, tt.name, got, ok, tt.want)
		}
	}

	q := new(dns.Msg)
	q.SetQuestion("httpbin.", dns.TypeA)
	if a := k.answer("foo", q); a.Rcode != dns.RcodeSuccess || len(a.Answer) != 1 || a.Answer[0].(*dns.A).A.String() != "10.96.0.10" || !a.Authoritative {
		t.Errorf("A httpbin. from foo: %v", a)
	}
	q.SetQuestion("httpbin.", dns.TypeAAAA)
	if a := k.answer("foo", q); a.Rcode != dns.RcodeSuccess || len(a.Answer) != 0 {
		t.Errorf("AAAA of a Service: want NOERROR and no record, got %v", a)
	}
	q.SetQuestion("nothing.", dns.TypeA)
	if a := k.answer("foo", q); a.Rcode != dns.RcodeNameError {
		t.Errorf("an unknown name: want NXDOMAIN, got %v", a)
	}
	k.update(model.New(nil, nil))
	if _, ok := k.lookup("foo", "httpbin"); ok {
		t.Error("a Service deleted by an apply still resolves")
	}
}

// An ExternalName Service's names answer with its target's address: a name of the
// outside world, or another Service's VIP (CoreDNS's CNAME, followed); a loop of
// aliases answers nothing.
func TestKubeDNSFollowsExternalNames(t *testing.T) {
	t.Parallel()
	m := model.New([]*model.Service{{Name: "httpbin", Namespace: "foo", VIP: netip.MustParseAddr("10.96.0.10"), Selector: map[string]string{"app": "httpbin"}}}, nil)
	m.ExternalNames = []*model.ExternalName{
		{Name: "my-httpbin", Namespace: "default", Target: "httpbin.org"},
		{Name: "inside", Namespace: "default", Target: "httpbin.foo.svc.cluster.local"},
		{Name: "a", Namespace: "default", Target: "b.default.svc.cluster.local"},
		{Name: "b", Namespace: "default", Target: "a.default.svc.cluster.local"},
	}
	k := newKubeDNS(m, testutil.Logger(t))
	k.setWorld(map[string][]netip.Addr{"httpbin.org": {netip.MustParseAddr("172.31.255.10")}})
	for _, tt := range []struct{ ns, name, want string }{
		{"without-istio", "my-httpbin.default.svc.cluster.local", "172.31.255.10"},
		{"default", "my-httpbin", "172.31.255.10"},
		{"default", "inside", "10.96.0.10"},
		{"default", "a", ""},
	} {
		got, ok := k.lookup(tt.ns, tt.name)
		if (tt.want == "") == ok || ok && got.String() != tt.want {
			t.Errorf("lookup(%s, %q) = %v, %v; want %q", tt.ns, tt.name, got, ok, tt.want)
		}
	}
	names := podNameTable(m, "default", k.world)
	if got := names["my-httpbin"]; len(got) != 1 || got[0].String() != "172.31.255.10" {
		t.Errorf("a sidecar's name table answers my-httpbin with %v, want httpbin.org's address", got)
	}
}
