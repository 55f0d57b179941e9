package capture

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// renderCases are the configurations golden-tested here and applied for real in
// capture_linux_test.go: the same cases against the recorder and the kernel.
var renderCases = []struct {
	name   string
	mutate func(*Config)
}{
	{name: "default", mutate: func(*Config) {}},
	{name: "no-dns", mutate: func(c *Config) { c.DNSCapturePort = 0 }},
	{name: "custom-owner-ports", mutate: func(c *Config) {
		c.ProxyUID, c.ProxyGID = 1000, 1001
		c.InboundCapturePort, c.OutboundCapturePort, c.DNSCapturePort = 16006, 16001, 16053
		c.ExcludeInboundPorts = []uint16{22, 15021}
		c.InboundPassthroughSource = netip.MustParseAddr("127.0.0.7")
	}},
	{name: "no-excluded-ports", mutate: func(c *Config) { c.ExcludeInboundPorts = nil }},
}

func TestRenderGolden(t *testing.T) {
	for _, tt := range renderCases {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := c.Render()
			testutil.Golden(t, tt.name, []byte(got))
			if again := c.Render(); again != got {
				t.Fatal("Render is not deterministic")
			}
		})
	}
}

func TestRulesMatchRender(t *testing.T) {
	c := DefaultConfig()
	var fromRules []string
	for _, r := range c.Rules() {
		if r.Table != TableNAT || r.Chain == "" || r.Spec == "" {
			t.Errorf("incomplete rule %+v", r)
		}
		if r.Comment == "" || strings.ContainsAny(r.Comment, "\"'\n\\") || len(r.Comment) > 255 {
			t.Errorf("rule %q: comment %q must be non-empty, without quotes (iptables-save escapes them) and at most 255 bytes", r.Spec, r.Comment)
		}
		if strings.Count(r.Spec, "-j ") != 1 {
			t.Errorf("rule %q: want exactly one target", r.Spec)
		}
		fromRules = append(fromRules, r.Line())
	}
	var fromRender []string
	for _, l := range strings.Split(c.Render(), "\n") {
		if strings.HasPrefix(l, "-A ") {
			fromRender = append(fromRender, l)
		}
	}
	if !slices.Equal(fromRules, fromRender) {
		t.Fatalf("Render's rules differ from Rules():\n%s\n---\n%s", strings.Join(fromRender, "\n"), strings.Join(fromRules, "\n"))
	}
}

// TestRuleOrder pins the orderings that make capture correct, whatever the wording.
func TestRuleOrder(t *testing.T) {
	rules := DefaultConfig().Rules()
	index := func(chain, specPart string) int {
		t.Helper()
		for i, r := range rules {
			if r.Chain == chain && strings.Contains(r.Spec, specPart) {
				return i
			}
		}
		t.Fatalf("no %s rule containing %q", chain, specPart)
		return -1
	}
	before := func(a, b int, why string) {
		t.Helper()
		if a >= b {
			t.Errorf("%s: rule %d must come before rule %d", why, a, b)
		}
	}
	catchAll := index(ChainOutput, "-j "+ChainRedirect)
	before(index(ChainOutput, "-s 127.0.0.6/32"), catchAll, "passthrough source returns first")
	before(index(ChainOutput, "-m owner --uid-owner 1337 -j RETURN"), index(ChainOutput, "-j "+ChainOutputDNS), "proxy DNS is not captured")
	before(index(ChainOutput, "-m owner --gid-owner 1337 -j RETURN"), catchAll, "proxy traffic is not captured")
	before(index(ChainOutput, "-d 127.0.0.1/32 -j RETURN"), catchAll, "loopback is not captured")
	if catchAll != len(rules)-1 {
		t.Errorf("the catch-all redirect is rule %d, want the last (%d)", catchAll, len(rules)-1)
	}
	before(index(ChainInbound, "--dport 15021 -j RETURN"), index(ChainInbound, "-j "+ChainInRedirect), "excluded ports return before the redirect")
}

func TestNoDNSRendersNoDNSRules(t *testing.T) {
	c := DefaultConfig()
	c.DNSCapturePort = 0
	if out := c.Render(); strings.Contains(out, "53") || strings.Contains(out, ChainOutputDNS) {
		t.Fatalf("DNS capture disabled but rendered DNS rules:\n%s", out)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // substring; empty means valid
	}{
		{name: "default", mutate: func(*Config) {}},
		{name: "dns disabled", mutate: func(c *Config) { c.DNSCapturePort = 0 }},
		{name: "uid 0", mutate: func(c *Config) { c.ProxyUID = 0 }, wantErr: "proxy uid"},
		{name: "gid 0", mutate: func(c *Config) { c.ProxyGID = 0 }, wantErr: "proxy gid"},
		{name: "no inbound port", mutate: func(c *Config) { c.InboundCapturePort = 0 }, wantErr: "inbound capture port: required"},
		{name: "no outbound port", mutate: func(c *Config) { c.OutboundCapturePort = 0 }, wantErr: "outbound capture port: required"},
		{name: "same capture ports", mutate: func(c *Config) { c.OutboundCapturePort = c.InboundCapturePort }, wantErr: "both 15006"},
		{name: "dns on a capture port", mutate: func(c *Config) { c.DNSCapturePort = 15001 }, wantErr: "dns capture port"},
		{name: "excluded port 0", mutate: func(c *Config) { c.ExcludeInboundPorts = []uint16{0} }, wantErr: "port 0"},
		{name: "excluded twice", mutate: func(c *Config) { c.ExcludeInboundPorts = []uint16{15020, 15020} }, wantErr: "listed twice"},
		{name: "no passthrough source", mutate: func(c *Config) { c.InboundPassthroughSource = netip.Addr{} }, wantErr: "passthrough"},
		{name: "non-loopback passthrough", mutate: func(c *Config) { c.InboundPassthroughSource = netip.MustParseAddr("10.0.0.6") }, wantErr: "passthrough"},
		{name: "ipv6 passthrough", mutate: func(c *Config) { c.InboundPassthroughSource = netip.MustParseAddr("::6") }, wantErr: "passthrough"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			if !testutil.CheckErr(t, "Validate()", c.Validate(), tt.wantErr) {
				return
			}
		})
	}
}

func TestDefaultConfigIsMeshlabs(t *testing.T) {
	c := DefaultConfig()
	if c.ProxyUID != 1337 || c.ProxyGID != 1337 || c.InboundCapturePort != 15006 || c.OutboundCapturePort != 15001 ||
		c.DNSCapturePort != 15053 || !slices.Equal(c.ExcludeInboundPorts, []uint16{15020, 15021, 15090}) ||
		c.InboundPassthroughSource != netip.MustParseAddr("127.0.0.6") {
		t.Fatalf("DefaultConfig() = %+v, want the ports and ids of docs/ARCHITECTURE.md", c)
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	rules := DefaultConfig().Render()
	if err := r.Apply("ml-demo-a", rules); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	r.Err = boom
	if err := r.Apply("ml-demo-b", "x"); !errors.Is(err, boom) {
		t.Fatalf("Apply = %v, want %v", err, boom)
	}
	want := []Applied{{Namespace: "ml-demo-a", Rules: rules}, {Namespace: "ml-demo-b", Rules: "x"}}
	got := r.Applied()
	if !slices.Equal(got, want) {
		t.Fatalf("Applied() = %v, want %v", got, want)
	}
	got[0].Namespace = "changed"
	if r.Applied()[0].Namespace != "ml-demo-a" {
		t.Fatal("Applied() returned the recorder's own slice")
	}
}
