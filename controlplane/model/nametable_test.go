package model

import (
	"net/netip"
	"reflect"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// nameTableBase is a backend service in default and one ServiceEntry in default.
func nameTableBase() *Model {
	m := New([]*Service{{Name: "backend", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10")}}, nil)
	m.Istio.ServiceEntries = []*IstioConfig[*networking.ServiceEntry]{{
		Name: "ext", Namespace: "default",
		Spec: &networking.ServiceEntry{Hosts: []string{"api.example.com"}, Addresses: []string{"240.0.0.1"}},
	}}
	return m
}

func TestNameTable(t *testing.T) {
	svcNames := func(ns string) map[string][]netip.Addr {
		t := map[string][]netip.Addr{
			"backend.default.svc.cluster.local": addrs("10.96.0.10"),
			"backend.default":                   addrs("10.96.0.10"),
			"backend.default.svc":               addrs("10.96.0.10"),
		}
		if ns == "default" {
			t["backend"] = addrs("10.96.0.10")
		}
		return t
	}
	with := func(base map[string][]netip.Addr, extra map[string][]netip.Addr) map[string][]netip.Addr {
		for k, v := range extra {
			base[k] = v
		}
		return base
	}
	se := func(m *Model) *networking.ServiceEntry { return m.Istio.ServiceEntries[0].Spec }
	for _, tc := range []struct {
		name   string
		ns     string
		mutate func(*Model)
		want   map[string][]netip.Addr
	}{
		{name: "service and entry", ns: "default", mutate: func(*Model) {},
			want: with(svcNames("default"), map[string][]netip.Addr{"api.example.com": addrs("240.0.0.1")})},
		{name: "entry visible from another namespace", ns: "shop", mutate: func(*Model) {},
			want: with(svcNames("shop"), map[string][]netip.Addr{"api.example.com": addrs("240.0.0.1")})},
		{name: "every host gets every address, lowercased, /32 accepted", ns: "default", mutate: func(m *Model) {
			se(m).Hosts = []string{"API.example.com.", "db.example.com"}
			se(m).Addresses = []string{"240.0.0.1", "240.0.0.2/32"}
		}, want: with(svcNames("default"), map[string][]netip.Addr{
			"api.example.com": addrs("240.0.0.1", "240.0.0.2"),
			"db.example.com":  addrs("240.0.0.1", "240.0.0.2"),
		})},
		{name: "no addresses: left to the resolver", ns: "default", mutate: func(m *Model) { se(m).Addresses = nil },
			want: svcNames("default")},
		{name: "wide CIDR is not an answer", ns: "default", mutate: func(m *Model) { se(m).Addresses = []string{"240.0.0.0/24"} },
			want: svcNames("default")},
		{name: "wildcard host skipped", ns: "default", mutate: func(m *Model) { se(m).Hosts = []string{"*.example.com", "api.example.com"} },
			want: with(svcNames("default"), map[string][]netip.Addr{"api.example.com": addrs("240.0.0.1")})},
		{name: "exportTo dot hides it from other namespaces", ns: "shop", mutate: func(m *Model) { se(m).ExportTo = []string{"."} },
			want: svcNames("shop")},
		{name: "exportTo dot keeps it in its own", ns: "default", mutate: func(m *Model) { se(m).ExportTo = []string{"."} },
			want: with(svcNames("default"), map[string][]netip.Addr{"api.example.com": addrs("240.0.0.1")})},
		{name: "exportTo names a namespace", ns: "shop", mutate: func(m *Model) { se(m).ExportTo = []string{"shop"} },
			want: with(svcNames("shop"), map[string][]netip.Addr{"api.example.com": addrs("240.0.0.1")})},
		{name: "entry host equal to a service name adds its address once", ns: "default", mutate: func(m *Model) {
			se(m).Hosts = []string{"backend.default.svc.cluster.local"}
			se(m).Addresses = []string{"10.96.0.10", "240.0.0.9"}
		}, want: with(svcNames("default"), map[string][]netip.Addr{"backend.default.svc.cluster.local": addrs("10.96.0.10", "240.0.0.9")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := nameTableBase()
			tc.mutate(m)
			if got := m.NameTable(tc.ns); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NameTable(%q) =\n%v\nwant\n%v", tc.ns, got, tc.want)
			}
		})
	}
}
