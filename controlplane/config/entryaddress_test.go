package config

import (
	"net/netip"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// ServiceEntries without addresses get istiod's autoallocated ones (240.240.0.0/16),
// one per host, except resolution NONE (as the wildcard hosts the loader takes), an entry
// with addresses and one labelled networking.istio.io/enable-autoallocate-ip=false; a
// rebuild keeping the running model's allocations keeps each host's address when an
// earlier entry goes, as istiod keeps it in the entry's status, and a new host takes
// an address none held.
func TestServiceEntryAutoAllocation(t *testing.T) {
	t.Parallel()
	entry := func(name, extra string) string {
		return "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: " + name + "}\nspec:\n  ports: [{number: 80, name: http, protocol: HTTP}]\n" + extra
	}
	all := entry("a", "  hosts: [a.example.com, b.example.com]\n  resolution: DNS\n") +
		entry("none", "  hosts: [none.example.com]\n  resolution: NONE\n") +
		entry("own", "  hosts: [own.example.com]\n  addresses: [192.0.2.1]\n  resolution: DNS\n") +
		"---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: out, labels: {networking.istio.io/enable-autoallocate-ip: \"false\"}}\nspec:\n  hosts: [out.example.com]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n" +
		entry("c", "  hosts: [c.example.com]\n  resolution: DNS\n  endpoints: [{address: c.internal}]\n")
	s, err := Load("se.yaml", []byte(all))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	host := func(name, h string) model.EntryHost {
		return model.EntryHost{Namespace: "default", Name: name, Host: h}
	}
	want := map[model.EntryHost]netip.Addr{
		host("a", "a.example.com"): netip.MustParseAddr("240.240.0.1"),
		host("a", "b.example.com"): netip.MustParseAddr("240.240.0.2"),
		host("c", "c.example.com"): netip.MustParseAddr("240.240.0.3"),
	}
	if len(m.Istio.AutoAddresses) != len(want) {
		t.Fatalf("AutoAddresses = %v, want %v", m.Istio.AutoAddresses, want)
	}
	for k, a := range want {
		if m.Istio.AutoAddresses[k] != a {
			t.Errorf("%v: %v, want %v", k, m.Istio.AutoAddresses[k], a)
		}
	}
	// Entry a goes: c keeps 240.240.0.3, a new entry takes the next address.
	next, err := Load("se.yaml", []byte(entry("c", "  hosts: [c.example.com]\n  resolution: DNS\n  endpoints: [{address: c.internal}]\n")+
		entry("d", "  hosts: [d.example.com]\n  resolution: DNS\n")))
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOpts
	o.Keep = AllocationsOf(m)
	m2, err := next.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.Istio.AutoAddresses[host("c", "c.example.com")]; got != netip.MustParseAddr("240.240.0.3") {
		t.Errorf("c after a rebuild: %v, want its 240.240.0.3 kept", got)
	}
	if got := m2.Istio.AutoAddresses[host("d", "d.example.com")]; got != netip.MustParseAddr("240.240.0.4") {
		t.Errorf("d: %v, want 240.240.0.4: a's addresses are not given again at once, as istiod's allocator moves on", got)
	}
}
