package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios"
)

var defaultOpts = BuildOptions{
	PodCIDR:     netip.MustParsePrefix("10.244.0.0/16"),
	ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
}

// render prints a model as stable text for golden files.
func render(m *model.Model) string {
	var b strings.Builder
	for _, s := range m.Services {
		fmt.Fprintf(&b, "service %s vip=%s selector=%s origin=%q\n", s.Hostname(), s.VIP, formatLabels(s.Selector), s.Origin)
		for _, p := range s.Ports {
			fmt.Fprintf(&b, "  port %s %d->%d %s\n", p.Name, p.Port, p.TargetPort, p.Protocol)
			for _, e := range m.Endpoints(s, p) {
				fmt.Fprintf(&b, "    endpoint %s (%s)\n", e.Addr, e.Pod.Name)
			}
		}
	}
	for _, p := range m.Pods {
		fmt.Fprintf(&b, "pod %s/%s ip=%s workload=%s labels=%s sa=%s ports=%v\n",
			p.Namespace, p.Name, p.IP, p.Workload, formatLabels(p.Labels), p.ServiceAccount, p.Ports)
		fmt.Fprintf(&b, "  node=%s cluster=%s identity=%s\n", p.NodeID(), p.ServiceCluster(), p.SpiffeID(model.DefaultTrustDomain))
		fmt.Fprintf(&b, "  app command=%q upstreams=%q\n", p.App.Command, p.App.Upstreams)
		fmt.Fprintf(&b, "  sidecar inject=%t hold=%t log=%q\n", p.Sidecar.Inject, p.Sidecar.HoldApplicationUntilProxyStarts, p.Sidecar.LogLevel)
		fmt.Fprintf(&b, "  origin=%q\n", p.Origin)
	}
	return b.String()
}

func TestBuildGolden(t *testing.T) {
	t.Parallel()
	for _, name := range scenarios.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, file, err := scenarios.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Load(file, data)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			m, err := s.Build(defaultOpts)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			testutil.Golden(t, "build-"+name, []byte(render(m)))
		})
	}
}

func TestBuildReplicasAndOrder(t *testing.T) {
	t.Parallel()
	in := docs(
		workload("zeta", "  labels: {app: z}\n  replicas: 3\n  command: [/bin/sleep, '1000']\n"),
		workload("alpha", "  labels: {app: a}\n  replicas: 0\n"),
		"apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: beta, namespace: aaa}\nspec: {labels: {app: b}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: z}\nspec: {selector: {app: z}, ports: [{port: 80, targetPort: 8080}]}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {selector: {app: a}, ports: [{port: 80}]}\n",
	)
	s, err := Load("t.yaml", []byte(in))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.1.2.0/24"), ServiceCIDR: netip.MustParsePrefix("10.9.0.0/24")})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var got []string
	for _, p := range m.Pods {
		got = append(got, p.Namespace+"/"+p.Name+"="+p.IP.String())
	}
	want := []string{"aaa/beta=10.1.2.2", "default/zeta-0=10.1.2.3", "default/zeta-1=10.1.2.4", "default/zeta-2=10.1.2.5"}
	if !slices.Equal(got, want) {
		t.Errorf("pods = %v, want %v", got, want)
	}
	if m.Services[0].Name != "a" || m.Services[0].VIP != netip.MustParseAddr("10.9.0.10") || m.Services[1].VIP != netip.MustParseAddr("10.9.0.11") {
		t.Errorf("services = %s %s, %s %s; want a at 10.9.0.10, z at 10.9.0.11", m.Services[0].Name, m.Services[0].VIP, m.Services[1].Name, m.Services[1].VIP)
	}
	if eps := m.Endpoints(m.Services[1], m.Services[1].Ports[0]); len(eps) != 3 || eps[0].Addr.Port() != 8080 {
		t.Errorf("endpoints of z = %v, want 3 at target port 8080", eps)
	}
	if got := Gateway(netip.MustParsePrefix("10.1.2.0/24")); got != netip.MustParseAddr("10.1.2.1") {
		t.Errorf("Gateway = %s, want 10.1.2.1", got)
	}
	// Each Build is independent: changing one model leaves the next untouched.
	m.Pods[0].Labels["app"] = "changed"
	m2, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Pods[0].Labels["app"] != "b" || m2.Pods[0].IP != netip.MustParseAddr("10.244.0.2") {
		t.Errorf("second build pod = %+v, want labels app=b at 10.244.0.2", m2.Pods[0])
	}
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	s, err := Load("t.yaml", []byte(docs(service(okService), workload("backend", okWorkload+"  replicas: 3\n"))))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts BuildOptions
		want string
	}{
		{"no pod cidr", BuildOptions{ServiceCIDR: defaultOpts.ServiceCIDR}, "build model: pod CIDR is required"},
		{"no service cidr", BuildOptions{PodCIDR: defaultOpts.PodCIDR}, "build model: service CIDR is required"},
		{"overlap", BuildOptions{PodCIDR: netip.MustParsePrefix("10.0.0.0/8"), ServiceCIDR: defaultOpts.ServiceCIDR}, "build model: pod CIDR 10.0.0.0/8 overlaps service CIDR 10.96.0.0/16"},
		{"pod cidr too small", BuildOptions{PodCIDR: netip.MustParsePrefix("10.1.0.0/30"), ServiceCIDR: defaultOpts.ServiceCIDR}, "assign pod addresses in 10.1.0.0/30 (the gateway takes the first host): room for 1 addresses, 3 needed"},
		{"service cidr too small", BuildOptions{PodCIDR: defaultOpts.PodCIDR, ServiceCIDR: netip.MustParsePrefix("10.96.0.0/29")}, "assign service VIPs in 10.96.0.0/29 (from offset 10): room for 0 addresses, 1 needed"},
	}
	for _, tt := range tests {
		if _, err := s.Build(tt.opts); err == nil || err.Error() != tt.want {
			t.Errorf("%s: Build error = %v, want %q", tt.name, err, tt.want)
		}
	}
	// Exactly full: /29 has 8 addresses: network, gateway, 5 pods, broadcast.
	if _, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.1.0.0/29"), ServiceCIDR: defaultOpts.ServiceCIDR}); err != nil {
		t.Errorf("Build in a /29 with 3 pods: %v", err)
	}
}
