package listener

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// siteServer is an HTTPS server (its own certificate) answering every request with tag.
func siteServer(t *testing.T, tag string) netip.AddrPort {
	t.Helper()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, tag) }))
	t.Cleanup(s.Close)
	return netip.MustParseAddrPort(s.Listener.Addr().String())
}

func weightedFilter(t *testing.T, prefix string, clusters ...string) []*listenerv3.Filter {
	t.Helper()
	var ws []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight
	for _, c := range clusters {
		ws = append(ws, &tcpv3.TcpProxy_WeightedCluster_ClusterWeight{Name: c, Weight: 1})
	}
	return []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &tcpv3.TcpProxy{
		StatPrefix: prefix, ClusterSpecifier: &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{Clusters: ws}},
	})}}}
}

// TestSidecarSNIChainsAfterHandoff runs the listeners istiod builds for a sidecar's
// TLS ports behind virtualOutbound: a connection handed off to the wildcard
// 0.0.0.0_443 has its ClientHello read by that listener's tls_inspector and takes the
// chain whose server_names hold its SNI (a weighted one spreads connections), an SNI
// no chain names takes the default chain; a connection to a VIP with its own
// listener takes that listener's chain whatever its SNI. The client's TLS reaches the
// sites untouched: each answers with its own certificate for the SNI asked.
func TestSidecarSNIChainsAfterHandoff(t *testing.T) {
	store := stats.NewStore()
	cm := cluster.NewManager(store)
	t.Cleanup(cm.Close)
	sites := map[string]netip.AddrPort{}
	for _, tag := range []string{"cnn", "google", "google-b", "passthrough", "vip"} {
		sites[tag] = siteServer(t, tag)
		cm.AddStatic([]*cluster.Config{staticCluster(t, "c-"+tag, sites[tag], nil)})
	}
	// The original destination of each connection, by its source address: the test
	// dials from a loopback address of its choice (no iptables needed).
	var mu sync.Mutex
	origDst := map[netip.Addr]netip.AddrPort{}
	m := NewManager(Deps{
		Clusters: cm, Routes: httpconn.NewRouteStore(), Stats: store, Logger: testutil.Logger(t),
		OriginalDst: func(c *net.TCPConn) (netip.AddrPort, error) {
			mu.Lock()
			defer mu.Unlock()
			return origDst[netip.MustParseAddrPort(c.RemoteAddr().String()).Addr()], nil
		},
	})
	t.Cleanup(m.Close)
	inspector := []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.tls_inspector", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspv3.TlsInspector{})}}}
	var cfgs []*Config
	for _, l := range []*listenerv3.Listener{
		{
			Name: "virtualOutbound", Address: addr("127.0.0.1", 0), UseOriginalDst: wrapperspb.Bool(true),
			FilterChains: []*listenerv3.FilterChain{{Name: "catchall", Filters: tcpFilter(t, "c-passthrough")}},
		},
		{
			Name: "0.0.0.0_443", Address: addr("0.0.0.0", 443), BindToPort: wrapperspb.Bool(false),
			ListenerFilters: inspector, ContinueOnListenerFiltersTimeout: true,
			FilterChains: []*listenerv3.FilterChain{
				{FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"edition.cnn.com"}}, Filters: tcpFilter(t, "c-cnn")},
				{FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"www.google.com"}}, Filters: weightedFilter(t, "google.default", "c-google", "c-google-b")},
			},
			DefaultFilterChain: &listenerv3.FilterChain{Name: "PassthroughFilterChain", FilterChainMatch: &listenerv3.FilterChainMatch{}, Filters: tcpFilter(t, "c-passthrough")},
		},
		{
			Name: "10.96.0.25_443", Address: addr("10.96.0.25", 443), BindToPort: wrapperspb.Bool(false),
			FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "c-vip")}},
		},
	} {
		cfg, err := Compile(l)
		if err != nil {
			t.Fatalf("compile %s: %v", l.GetName(), err)
		}
		cfgs = append(cfgs, cfg)
	}
	if err := m.ApplyLDS(cfgs); err != nil {
		t.Fatal(err)
	}
	outbound, _ := m.Addr("virtualOutbound")

	get := func(src, dst, sni string) (string, error) {
		t.Helper()
		mu.Lock()
		origDst[netip.MustParseAddr(src)] = netip.MustParseAddrPort(dst)
		mu.Unlock()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		tr := &http.Transport{
			DialContext:       d.DialContext,
			TLSClientConfig:   &tls.Config{ServerName: sni, InsecureSkipVerify: true}, //nolint:gosec // the sites' certificates are httptest's; the SNI is what is tested
			DisableKeepAlives: true,
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + outbound.String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, tc := range []struct{ name, src, dst, sni, want string }{
		{"sni_of_a_chain", "127.0.0.2", "172.31.255.11:443", "edition.cnn.com", "cnn"},
		{"sni_no_chain_names_takes_the_default_chain", "127.0.0.3", "172.31.255.12:443", "api.example.org", "passthrough"},
		{"a_vip_listener_ignores_sni", "127.0.0.4", "10.96.0.25:443", "edition.cnn.com", "vip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := get(tc.src, tc.dst, tc.sni)
			if err != nil || got != tc.want {
				t.Fatalf("https to %s with SNI %s: %q, %v; want %q", tc.dst, tc.sni, got, err, tc.want)
			}
		})
	}
	seen := map[string]int{}
	for range 20 {
		got, err := get("127.0.0.5", "172.31.255.12:443", "www.google.com")
		if err != nil {
			t.Fatalf("https with SNI www.google.com: %v", err)
		}
		seen[got]++
	}
	if seen["google"] == 0 || seen["google-b"] == 0 || seen["google"]+seen["google-b"] != 20 {
		t.Errorf("20 connections with SNI www.google.com reached %v, want both weighted clusters", seen)
	}
	if got := store.Value("listener.0.0.0.0_443.downstream_cx_total"); got != 22 {
		t.Errorf("listener.0.0.0.0_443.downstream_cx_total = %d, want 22 (handed off)", got)
	}
	if got := store.Value("listener.10.96.0.25_443.downstream_cx_total"); got != 1 {
		t.Errorf("listener.10.96.0.25_443.downstream_cx_total = %d, want 1", got)
	}
}

// TestCompileRefusesChainsEnvoyRefuses: Envoy's filter chain manager refuses a
// listener whose chains cannot be told apart, so the proxy NACKs what Envoy would:
// two identical matches (named), two matches sharing a server name at the same
// destination (overlapping, case-insensitive), and a partial wildcard server name.
// Different SNI sets, an exact name beside a wildcard covering it, and the same SNI on
// another destination port are distinct.
func TestCompileRefusesChainsEnvoyRefuses(t *testing.T) {
	sni := func(name string, port uint32, names ...string) *listenerv3.FilterChain {
		m := &listenerv3.FilterChainMatch{ServerNames: names}
		if port != 0 {
			m.DestinationPort = wrapperspb.UInt32(port)
		}
		return &listenerv3.FilterChain{Name: name, FilterChainMatch: m, Filters: tcpFilter(t, "c")}
	}
	for _, tc := range []struct {
		name   string
		chains []*listenerv3.FilterChain
		want   string // "" when accepted
	}{
		{"distinct server names", []*listenerv3.FilterChain{sni("a", 0, "a.example.com"), sni("b", 0, "b.example.com", "c.example.com")}, ""},
		{"exact beside a covering wildcard", []*listenerv3.FilterChain{sni("a", 0, "a.example.com"), sni("w", 0, "*.example.com")}, ""},
		{"same name on another destination port", []*listenerv3.FilterChain{sni("a", 443, "a.example.com"), sni("b", 8443, "a.example.com")}, ""},
		{"identical matches", []*listenerv3.FilterChain{sni("one", 0, "a.example.com"), sni("two", 0, "a.example.com")},
			"listener 'l': filter chain 'two' has the same matching rules defined as 'one'"},
		{"a shared server name", []*listenerv3.FilterChain{sni("one", 0, "a.example.com", "b.example.com"), sni("two", 0, "B.example.com")},
			"listener 'l': multiple filter chains with overlapping matching rules are defined"},
		{"two match-all chains", []*listenerv3.FilterChain{{Name: "x", Filters: tcpFilter(t, "c")}, {Name: "y", Filters: tcpFilter(t, "c")}},
			"listener 'l': filter chain 'y' has the same matching rules defined as 'x'"},
		{"partial wildcard", []*listenerv3.FilterChain{sni("p", 0, "a*.example.com")},
			`listener 'l': filter_chains[0].filter_chain_match.server_names: partial wildcards are not supported in "server_names"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(&listenerv3.Listener{Name: "l", Address: addr("0.0.0.0", 443), FilterChains: tc.chains})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Compile: %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Compile: %v, want %q", err, tc.want)
			}
		})
	}
}
