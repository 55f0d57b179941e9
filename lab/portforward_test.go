package lab

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

func TestParsePortMapping(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]PortMapping{"8080:80": {8080, 80}, "80": {80, 80}, ":80": {0, 80}} {
		if got, err := ParsePortMapping(in); err != nil || got != want {
			t.Errorf("ParsePortMapping(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a:80", "80:", "80:70000", "0", "-1:80"} {
		if _, err := ParsePortMapping(in); err == nil {
			t.Errorf("ParsePortMapping(%q) succeeded", in)
		}
	}
}

// A Service's port is its target port on the first pod it selects, as kubectl's
// port-forward svc/NAME; a pod or workload reference keeps the port; unknown names,
// ports and non-loopback addresses are refused with what exists.
func TestPortForwardResolve(t *testing.T) {
	t.Parallel()
	r := &Record{Name: "pf",
		Pods: []PodRecord{
			{Name: "istio-ingressgateway-x-2", Namespace: "istio-system", IP: netip.MustParseAddr("10.244.0.9")},
			{Name: "istio-ingressgateway-x-1", Namespace: "istio-system", IP: netip.MustParseAddr("10.244.0.8"), Workload: "istio-ingressgateway"},
			{Name: "web", Namespace: "default", IP: netip.MustParseAddr("10.244.0.2")},
		},
		Services: []ServiceRecord{{Name: "istio-ingressgateway", Namespace: "istio-system",
			Ports: []ServicePortRecord{{Port: 80, TargetPort: 8080}, {Port: 443, TargetPort: 8443}},
			Pods:  []string{"istio-ingressgateway-x-2.istio-system", "istio-ingressgateway-x-1.istio-system"}}}, // keys
	}
	c := PortForwardConfig{Record: r, Namespace: "istio-system", Target: "svc/istio-ingressgateway", Ports: []PortMapping{{8080, 80}, {0, 443}}}
	pod, ts, err := c.resolve()
	if err != nil || pod != "istio-ingressgateway-x-1.istio-system" || len(ts) != 2 || ts[0].addr.String() != "10.244.0.8:8080" || ts[1].addr.String() != "10.244.0.8:8443" {
		t.Errorf("svc: %s %v %v", pod, ts, err)
	}
	c = PortForwardConfig{Record: r, Target: "web", Ports: []PortMapping{{9000, 8080}}}
	if pod, ts, err := c.resolve(); err != nil || pod != "web" || ts[0].addr.String() != "10.244.0.2:8080" {
		t.Errorf("pod: %s %v %v", pod, ts, err)
	}
	for _, tc := range []struct {
		c    PortForwardConfig
		want string
	}{
		{PortForwardConfig{Record: r, Namespace: "istio-system", Target: "svc/nope", Ports: []PortMapping{{1, 80}}}, `unknown service "nope" in namespace istio-system of lab pf (valid: istio-ingressgateway)`},
		{PortForwardConfig{Record: r, Namespace: "istio-system", Target: "svc/istio-ingressgateway", Ports: []PortMapping{{1, 81}}}, "has no port 81 (ports: 80, 443)"},
		{PortForwardConfig{Record: r, Target: "svc/istio-ingressgateway", Ports: []PortMapping{{1, 80}}}, "in namespace default"},
		{PortForwardConfig{Record: r, Target: "web", Ports: []PortMapping{{1, 80}}, Address: netip.MustParseAddr("0.0.0.0")}, "not a loopback address"},
	} {
		if err := PortForward(context.Background(), tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PortForward(%s) = %v, want %q", tc.c.Target, err, tc.want)
		}
	}
}
