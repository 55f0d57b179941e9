package inpod

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istioTestProbeV6 is the IPv6 host probe address istio-cni's own golden tests use.
var istioTestProbeV6 = netip.MustParseAddr("e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164")

// renderCases are golden-tested here and applied for real in inpod_linux_test.go. istio
// names the golden file of istio-cni's tests (cni/pkg/iptables/testdata) with the same
// rules; "" when istio-cni has no such case.
var renderCases = []struct {
	name   string
	istio  string
	mutate func(*Config)
}{
	{name: "default", istio: "default", mutate: func(*Config) {}},
	{name: "default-ipv6", istio: "default_ipv6", mutate: func(c *Config) { c.IPv6 = true; c.HostProbeSourceV6 = istioTestProbeV6 }},
	{name: "no-dns", istio: "dns_pod_disabled_and_on_globally", mutate: func(c *Config) { c.DNSPort = 0 }},
	{name: "no-dns-ipv6", istio: "dns_pod_disabled_and_on_globally_ipv6", mutate: func(c *Config) {
		c.DNSPort = 0
		c.IPv6 = true
		c.HostProbeSourceV6 = istioTestProbeV6
	}},
	{name: "no-probe", mutate: func(c *Config) { c.HostProbeSource = netip.Addr{} }},
	{name: "custom", mutate: func(c *Config) {
		c.Mark, c.ConnMark = 0x53a, 0x112
		c.InboundPlaintextPort, c.InboundTunnelPort, c.OutboundPort, c.DNSPort = 16006, 16008, 16001, 16053
		c.RouteTable, c.RulePriority = 101, 32000
	}},
}

func config(t *testing.T, mutate func(*Config)) Config {
	t.Helper()
	c := DefaultConfig()
	mutate(&c)
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return c
}

func TestRenderGolden(t *testing.T) {
	for _, tt := range renderCases {
		t.Run(tt.name, func(t *testing.T) {
			c := config(t, tt.mutate)
			var got strings.Builder
			for _, f := range c.Families() {
				got.WriteString(c.Render(f))
				got.WriteString(c.RenderReplace(f))
				got.WriteString(c.RenderRemove(f))
			}
			testutil.Golden(t, tt.name, []byte(got.String()))
			if again := c.Render(IPv4); again != c.Render(IPv4) {
				t.Fatal("Render is not deterministic")
			}
		})
	}
}

// istioForm renders rules as istio-cni's golden files print them: per table, its chains
// with -N and its rules without comments.
func istioForm(c Config, f Family) []string {
	rules := c.Rules(f)
	var out []string
	for _, table := range Tables {
		var lines []string
		for _, r := range rules {
			if r.Table == table {
				lines = append(lines, "-A "+r.Chain+" "+r.Spec)
			}
		}
		if len(lines) == 0 {
			continue // istio-cni writes no raw table without DNS capture
		}
		out = append(out, "* "+table)
		for _, ch := range chains(rules, table) {
			out = append(out, "-N "+ch)
		}
		out = append(out, lines...)
		out = append(out, "COMMIT")
	}
	return out
}

// istioModuleDir is Istio's source in the module cache, at the version the fidelity
// module pins; "" when it is not there.
func istioModuleDir(t *testing.T) string {
	t.Helper()
	gomod, err := os.ReadFile("../../fidelity/go.mod")
	if err != nil {
		return ""
	}
	m := regexp.MustCompile(`(?m)^\s*istio\.io/istio (\S+)`).FindSubmatch(gomod)
	if m == nil {
		return ""
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		gopath := cmpOr(os.Getenv("GOPATH"), filepath.Join(home, "go"))
		cache = filepath.Join(strings.Split(gopath, ":")[0], "pkg", "mod")
	}
	dir := filepath.Join(cache, "istio.io", "istio@"+string(m[1]))
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestMatchesIstioCNIGolden compares the rules, without meshlab's comments, with
// istio-cni's own golden files, rule for rule and in order.
func TestMatchesIstioCNIGolden(t *testing.T) {
	dir := istioModuleDir(t)
	if dir == "" {
		t.Skip("skipped: Istio's module (the version fidelity/go.mod pins) is not in the module cache; `cd fidelity && go mod download` fetches it")
	}
	for _, tt := range renderCases {
		if tt.istio == "" {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "cni/pkg/iptables/testdata", tt.istio+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				if l != "iptables-save" && l != "ip6tables-save" {
					want = append(want, l)
				}
			}
			c := config(t, tt.mutate)
			var got []string
			for _, f := range c.Families() {
				got = append(got, istioForm(c, f)...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("rules differ from istio-cni's %s.golden:\n--- istio-cni\n%s\n--- meshlab\n%s", tt.istio, strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
		})
	}
}

func TestRulesAndComments(t *testing.T) {
	c := DefaultConfig()
	c.IPv6 = true
	for _, f := range c.Families() {
		for _, r := range c.Rules(f) {
			if !slices.Contains(Tables, r.Table) || r.Chain == "" || r.Spec == "" {
				t.Errorf("incomplete rule %+v", r)
			}
			if r.Comment == "" || strings.ContainsAny(r.Comment, "\"'\n\\") || len(r.Comment) > 255 {
				t.Errorf("rule %q: comment %q must be non-empty, without quotes and at most 255 bytes", r.Spec, r.Comment)
			}
			if strings.Count(r.Spec, "-j ") != 1 {
				t.Errorf("rule %q: want exactly one target", r.Spec)
			}
		}
	}
	v4 := strings.Join(specs(c.Rules(IPv4)), "\n")
	v6 := strings.Join(specs(c.Rules(IPv6)), "\n")
	if strings.Contains(v4, "::1/128") || strings.Contains(v6, "127.0.0.1/32") || !strings.Contains(v6, c.HostProbeSourceV6.String()) {
		t.Fatalf("families mixed:\nv4:\n%s\nv6:\n%s", v4, v6)
	}
}

func specs(rs []Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Chain + " " + r.Spec
	}
	return out
}

// TestRuleOrder pins the orderings that make redirection correct, whatever the wording.
func TestRuleOrder(t *testing.T) {
	rules := DefaultConfig().Rules(IPv4)
	index := func(table, chain, part string) int {
		t.Helper()
		for i, r := range rules {
			if r.Table == table && r.Chain == chain && strings.Contains(r.Spec, part) {
				return i
			}
		}
		t.Fatalf("no %s %s rule containing %q", table, chain, part)
		return -1
	}
	catchAll := index("nat", ChainOutput, "--to-ports 15001")
	for _, part := range []string{"-d 169.254.7.127", "--dport 53 -j", "-m mark --mark 0x111/0xfff -j ACCEPT", "-o lo -j ACCEPT"} {
		if i := index("nat", ChainOutput, part); i >= catchAll {
			t.Errorf("nat %s rule %q (%d) must come before the outbound redirect (%d)", ChainOutput, part, i, catchAll)
		}
	}
	if probe, in := index("nat", ChainPrerouting, "-s 169.254.7.127"), index("nat", ChainPrerouting, "--to-ports 15006"); probe >= in {
		t.Errorf("probe bypass %d must come before the inbound redirect %d", probe, in)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "default", mutate: func(*Config) {}},
		{name: "dns off", mutate: func(c *Config) { c.DNSPort = 0 }},
		{name: "no probe", mutate: func(c *Config) { c.HostProbeSource = netip.Addr{} }},
		{name: "ipv6", mutate: func(c *Config) { c.IPv6 = true }},
		{name: "mark 0", mutate: func(c *Config) { c.Mark = 0 }, wantErr: "mark 0"},
		{name: "mark outside mask", mutate: func(c *Config) { c.Mark = 0x1539 }, wantErr: "inside its mask"},
		{name: "connmark 0", mutate: func(c *Config) { c.ConnMark = 0 }, wantErr: "connection mark"},
		{name: "same marks", mutate: func(c *Config) { c.ConnMark = c.Mark }, wantErr: "both 0x539"},
		{name: "no restore mask", mutate: func(c *Config) { c.RestoreMask = 0 }, wantErr: "restore mask"},
		{name: "no outbound port", mutate: func(c *Config) { c.OutboundPort = 0 }, wantErr: "outbound port: required"},
		{name: "same ports", mutate: func(c *Config) { c.OutboundPort = 15006 }, wantErr: "already the inbound plaintext port"},
		{name: "dns on the tunnel port", mutate: func(c *Config) { c.DNSPort = 15008 }, wantErr: "dns port 15008"},
		{name: "v6 probe as v4", mutate: func(c *Config) { c.HostProbeSource = istioTestProbeV6 }, wantErr: "want an IPv4 address"},
		{name: "ipv6 without v6 probe", mutate: func(c *Config) { c.IPv6 = true; c.HostProbeSourceV6 = netip.Addr{} }, wantErr: "host probe source v6"},
		{name: "main table", mutate: func(c *Config) { c.RouteTable = 254 }, wantErr: "route table 254"},
		{name: "priority after main", mutate: func(c *Config) { c.RulePriority = 32766 }, wantErr: "rule priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			testutil.CheckErr(t, "Validate()", c.Validate(), tt.wantErr)
		})
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	c := DefaultConfig()
	if err := r.Install("ml-x-a", c); err != nil {
		t.Fatal(err)
	}
	if err := r.InstallNew("ml-x-b", c, "*nat\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	r.Err = boom
	if err := r.Remove("ml-x-a", c); !errors.Is(err, boom) {
		t.Fatalf("Remove = %v, want %v", err, boom)
	}
	got := fmt.Sprint(r.Calls())
	want := fmt.Sprint([]Call{{"install", "ml-x-a", c, ""}, {"install-new", "ml-x-b", c, "*nat\nCOMMIT\n"}, {"remove", "ml-x-a", c, ""}})
	if got != want {
		t.Fatalf("Calls() = %s, want %s", got, want)
	}
}
