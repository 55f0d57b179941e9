package config

import (
	"net/netip"
	"strings"
	"testing"
)

// Configs Istio accepts load, so that Istio's behaviour (and its classic bugs) can be
// reproduced: istiod's validation (pkg/config/validation) refuses none of them.
func TestLoadIstioAcceptsWhatIstioAccepts(t *testing.T) {
	t.Parallel()
	hello := helloYAML(t)
	second := strings.Replace(vs("  hosts: [backend.default.svc.cluster.local]\n  http: [{route: [{destination: {host: backend, subset: v2}}]}]\n"), "name: backend", "name: backend-b", 1)
	tests := []struct {
		name string
		docs []string
	}{
		{
			name: "relative weights that do not sum to 100",
			docs: []string{backendDR, vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend, subset: v1}, weight: 1}, {destination: {host: backend, subset: v2}, weight: 3}]}]\n  tcp: [{route: [{destination: {host: backend, port: {number: 8080}}, weight: 7}, {destination: {host: frontend}, weight: 7}]}]\n")},
		},
		{
			name: "two VirtualServices for one host",
			docs: []string{backendDR, vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend, subset: v1}}]}]\n"), second},
		},
		{
			name: "a DestinationRule for a host with no Service",
			docs: []string{dr("  host: nowhere\n  subsets: [{name: v1, labels: {version: v1}}]\n"), strings.Replace(dr("  host: ratings.prod.svc.cluster.local\n"), "name: other", "name: ratings", 1)},
		},
		{
			name: "two DestinationRules for one host in one namespace",
			docs: []string{backendDR, dr("  host: backend.default.svc.cluster.local\n  subsets: [{name: v3, labels: {version: v3}}]\n")},
		},
		{
			name: "a route to a subset no DestinationRule defines",
			docs: []string{vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend, subset: v3}}]}]\n")},
		},
		{
			name: "the deprecated fault.delay.percent",
			docs: []string{vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend}}], fault: {delay: {fixedDelay: 1s, percent: 50}}}]\n")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Load("t.yaml", []byte(docs(append([]string{hello}, tt.docs...)...)))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if _, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.1.0.0/24"), ServiceCIDR: netip.MustParsePrefix("10.2.0.0/24")}); err != nil {
				t.Fatalf("Build: %v", err)
			}
		})
	}
}

// What Istio's validation refuses stays refused.
func TestLoadIstioWeightRules(t *testing.T) {
	t.Parallel()
	hello := helloYAML(t)
	for _, tt := range []struct {
		name, spec, want string
	}{
		{
			name: "all zero",
			spec: "  hosts: [backend]\n  http: [{route: [{destination: {host: backend}, weight: 0}, {destination: {host: frontend}}]}]\n",
			want: "t.yaml: VirtualService default/backend: spec.http[0].route: total destination weight is 0",
		},
		{
			name: "tcp all zero",
			spec: "  hosts: [backend]\n  tcp: [{route: [{destination: {host: backend, port: {number: 8080}}}, {destination: {host: frontend}}]}]\n",
			want: "t.yaml: VirtualService default/backend: spec.tcp[0].route: total destination weight is 0",
		},
		{
			name: "negative",
			spec: "  hosts: [backend]\n  http: [{route: [{destination: {host: backend}, weight: -1}, {destination: {host: frontend}, weight: 5}]}]\n",
			want: "t.yaml: VirtualService default/backend: spec.http[0].route[0].weight: -1 must not be negative",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("t.yaml", []byte(docs(hello, vs(tt.spec))))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Load error = %v, want %s", err, tt.want)
			}
		})
	}
}
