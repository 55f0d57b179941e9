package kubeproxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

func ep(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// base is a lab-like cluster: backend with two endpoints, a three-endpoint TCP port, an
// unnamed port and a service port with no endpoints.
func base() Config {
	return Config{Services: []ServicePort{
		{Namespace: "default", Name: "backend", PortName: "http", VIP: netip.MustParseAddr("10.96.0.10"), Port: 8080,
			Endpoints: []netip.AddrPort{ep("10.244.0.3:8080"), ep("10.244.0.4:8080")}},
		{Namespace: "default", Name: "db", PortName: "tcp-db", VIP: netip.MustParseAddr("10.96.0.11"), Port: 5432, Protocol: TCP,
			Endpoints: []netip.AddrPort{ep("10.244.0.5:5432"), ep("10.244.0.6:5432"), ep("10.244.0.7:5432")}},
		{Namespace: "shop", Name: "cart", VIP: netip.MustParseAddr("10.96.0.12"), Port: 80,
			Endpoints: []netip.AddrPort{ep("10.244.0.8:9090")}},
		{Namespace: "default", Name: "empty", PortName: "http", VIP: netip.MustParseAddr("10.96.0.13"), Port: 8080},
	}}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{name: "lab", mutate: func(*Config) {}},
		{name: "no-services", mutate: func(c *Config) { c.Services = nil }},
		{name: "only-no-endpoints", mutate: func(c *Config) { c.Services = c.Services[3:] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			testutil.Golden(t, tc.name, []byte(c.Render()))
		})
	}
}

// TestChainNames pins kube-proxy's hashing: sha256 of the service port name and protocol,
// base32, 16 characters. RPP7DHNHMGOIIFDC is the chain a real cluster (kube-proxy before
// port names lost their trailing colon) made for default/kubernetes-bootcamp-v1: over TCP.
func TestChainNames(t *testing.T) {
	if got := hash("default/kubernetes-bootcamp-v1:tcp"); got != "RPP7DHNHMGOIIFDC" {
		t.Errorf("hash = %s, want RPP7DHNHMGOIIFDC", got)
	}
	s := base().Services[0]
	if got, want := ServiceChain(s), "KUBE-SVC-"+hash("default/backend:httptcp"); got != want {
		t.Errorf("ServiceChain = %s, want %s", got, want)
	}
	if got, want := EndpointChain(s, 1), "KUBE-SEP-"+hash("default/backend:httptcp10.244.0.4:8080"); got != want {
		t.Errorf("EndpointChain = %s, want %s", got, want)
	}
	for _, ch := range base().Chains(TableNAT) {
		if len(ch) > 28 {
			t.Errorf("chain %s is longer than iptables' 28 characters", ch)
		}
	}
}

// TestRulesCommented: every rule says why it exists (the dashboard explains them).
func TestRulesCommented(t *testing.T) {
	for _, r := range base().Rules() {
		if r.Comment == "" {
			t.Errorf("rule without comment: %+v", r)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "missing name", mutate: func(c *Config) { c.Services[0].Name = "" }, want: []string{"namespace and name: required"}},
		{name: "ipv6 vip", mutate: func(c *Config) { c.Services[0].VIP = netip.MustParseAddr("fd00::1") }, want: []string{"want an IPv4 address"}},
		{name: "no port", mutate: func(c *Config) { c.Services[0].Port = 0 }, want: []string{"port: required"}},
		{name: "bad protocol", mutate: func(c *Config) { c.Services[0].Protocol = "icmp" }, want: []string{`protocol "icmp"`}},
		{name: "bad endpoint", mutate: func(c *Config) { c.Services[0].Endpoints[0] = ep("10.244.0.3:0") }, want: []string{"endpoint 10.244.0.3:0"}},
		{name: "same vip and port", mutate: func(c *Config) { c.Services[1].VIP, c.Services[1].Port = c.Services[0].VIP, c.Services[0].Port },
			want: []string{"10.96.0.10:8080/tcp is also default/backend:http"}},
		{name: "same port name", mutate: func(c *Config) { c.Services[1].Name, c.Services[1].PortName = "backend", "http" },
			want: []string{"same service port name and protocol as default/backend:http"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}
