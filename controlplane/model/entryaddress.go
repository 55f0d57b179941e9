package model

import (
	"net/netip"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// EntryHost names one host of one ServiceEntry.
type EntryHost struct{ Namespace, Name, Host string }

// AutoAllocatePrefix is the range istiod's IP autoallocator gives ServiceEntry hosts
// their addresses from (PILOT_IP_AUTOALLOCATE_IPV4_PREFIX's default). It is class E:
// nothing routes it, a client reaches such an address only through its node proxy or
// sidecar, which captures it by DNS.
var AutoAllocatePrefix = netip.MustParsePrefix("240.240.0.0/16")

// AutoAllocates reports whether istiod's IP autoallocator gives se's hosts addresses
// (its ShouldV2AutoAllocateIP): resolution other than NONE, no addresses of its own, not
// opted out by the label networking.istio.io/enable-autoallocate-ip=false.
func AutoAllocates(se *IstioConfig[*networking.ServiceEntry]) bool {
	if se == nil || se.Spec == nil || se.Spec.GetResolution() == networking.ServiceEntry_NONE || len(se.Spec.GetAddresses()) > 0 {
		return false
	}
	return !strings.EqualFold(se.Labels["networking.istio.io/enable-autoallocate-ip"], "false")
}

// AutoAllocatedHost reports whether the autoallocator gives host of se an address: a
// wildcard host only with resolution DYNAMIC_DNS (istiod's keepHost).
func AutoAllocatedHost(se *IstioConfig[*networking.ServiceEntry], host string) bool {
	return !strings.HasPrefix(host, "*") || se.Spec.GetResolution() == networking.ServiceEntry_DYNAMIC_DNS
}

// EntryAddress returns the address clients reach host of se on: the ServiceEntry's
// first address (an IP), else the one the autoallocator gave the host.
func (m *Model) EntryAddress(se *IstioConfig[*networking.ServiceEntry], host string) (netip.Addr, bool) {
	for _, a := range se.Spec.GetAddresses() {
		if ip, err := netip.ParseAddr(a); err == nil {
			return ip, true
		}
	}
	a, ok := m.Istio.AutoAddresses[EntryHost{se.Namespace, se.Name, host}]
	return a, ok
}
