package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// DefaultDNSServer is where STRICT_DNS clusters send their queries: the pod agent's DNS
// proxy. Envoy would use the system resolver, but the proxy runs as uid 1337, whose DNS
// the capture rules do not redirect, and a lab pod has no other resolver to reach.
const DefaultDNSServer = "127.0.0.1:15053"

// DNSConfig is what a STRICT_DNS cluster resolves.
type DNSConfig struct {
	Targets     []DNSTarget
	RefreshRate time.Duration // dns_refresh_rate, default 5s
	// Jitter is dns_jitter: each refresh waits a random extra in [0, Jitter), so many
	// proxies do not ask at once (istiod sets 100ms on its DNS clusters); 0 is none.
	Jitter time.Duration
	V4Only bool // dns_lookup_family V4_ONLY
}

// nextRefresh returns how long to wait before the next resolution: the refresh rate
// plus rnd(Jitter) when there is jitter (rnd returns a value in [0, n), as rand.N).
func (d *DNSConfig) nextRefresh(rnd func(n time.Duration) time.Duration) time.Duration {
	if d.Jitter <= 0 {
		return d.RefreshRate
	}
	return d.RefreshRate + rnd(d.Jitter)
}

// DNSTarget is one endpoint of a STRICT_DNS load assignment: a name (or literal IP) and
// a port.
type DNSTarget struct {
	Name    string
	Port    uint16
	Healthy bool
}

// Resolver looks names up. net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewDNSResolver returns a resolver that sends every query to server (host:port) over UDP.
func NewDNSResolver(server string) Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

func (cfg *Config) fillDNS(c *clusterv3.Cluster) error {
	d := &DNSConfig{RefreshRate: 5 * time.Second}
	if r := c.GetDnsRefreshRate(); r != nil { //nolint:staticcheck // Istio still sends the deprecated dns_refresh_rate and Envoy honours it
		d.RefreshRate = r.AsDuration()
	}
	if err := checkDNSResolver(c.GetTypedDnsResolverConfig()); err != nil {
		return fmt.Errorf("typed_dns_resolver_config.%w", err)
	}
	if j := c.GetDnsJitter(); j != nil { //nolint:staticcheck // istiod still sets the deprecated dns_jitter and Envoy honours it
		d.Jitter = j.AsDuration()
	}
	switch c.GetDnsLookupFamily() {
	case clusterv3.Cluster_V4_ONLY:
		d.V4Only = true
	case clusterv3.Cluster_AUTO, clusterv3.Cluster_V4_PREFERRED, clusterv3.Cluster_ALL:
	default:
		return fmt.Errorf("dns_lookup_family: unsupported family %s", c.GetDnsLookupFamily())
	}
	for i, loc := range c.GetLoadAssignment().GetEndpoints() {
		if loc.GetPriority() != 0 {
			return fmt.Errorf("load_assignment.endpoints[%d].priority: only priority 0 is supported", i)
		}
		for j, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			if sa == nil || sa.GetPortValue() == 0 {
				return fmt.Errorf("load_assignment.endpoints[%d].lb_endpoints[%d].endpoint.address: STRICT_DNS needs a socket address with a port", i, j)
			}
			d.Targets = append(d.Targets, DNSTarget{Name: sa.GetAddress(), Port: uint16(sa.GetPortValue()), Healthy: isHealthy(lb.GetHealthStatus())})
		}
	}
	cfg.DNS = d
	return nil
}

// caresName is Envoy's c-ares DNS resolver, the one istiod names on its DNS clusters.
const caresName = "envoy.network.dns_resolver.cares"

// caresAllow lists what the proxy honours of the c-ares resolver's config: only
// udp_max_queries (istiod sets 100), a limit on queries per UDP socket before c-ares opens
// a new one, which changes nothing the proxy's resolver shows (it asks the agent's DNS
// proxy one query per socket). Resolver addresses and the other options are refused.
var caresAllow = fieldcheck.Allow{"envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig": {"udp_max_queries"}}

// checkDNSResolver accepts a STRICT_DNS cluster's typed_dns_resolver_config when it is
// c-ares with what caresAllow lists, and refuses any other resolver by name.
func checkDNSResolver(tc *corev3.TypedExtensionConfig) error {
	if tc == nil {
		return nil
	}
	m, err := tc.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if _, ok := m.(*caresv3.CaresDnsResolverConfig); !ok || tc.GetName() != caresName {
		return fmt.Errorf("name: unsupported DNS resolver %s (%s); meshlab proxy resolves with %s's options only", tc.GetName(), m.ProtoReflect().Descriptor().FullName(), caresName)
	}
	if err := caresAllow.Check(m); err != nil {
		return fmt.Errorf("typed_config.%w", err)
	}
	return nil
}

// resolveLoop resolves the cluster's targets now and every refresh interval until ctx
// ends, replacing the host set after each successful resolution (Envoy keeps the last
// good hosts when a resolution fails). respect_dns_ttl is accepted but the refresh rate
// is always used: Go's resolver does not report TTLs.
func (c *Cluster) resolveLoop(ctx context.Context, r Resolver) {
	sc := c.stats.scope
	attempt, success, failure := sc.Counter("update_attempt"), sc.Counter("update_success"), sc.Counter("update_failure")
	for {
		attempt.Inc()
		hosts, err := resolveTargets(ctx, r, c.cfg.DNS)
		if err == nil {
			success.Inc()
			c.setHosts(hosts)
		} else if ctx.Err() == nil {
			failure.Inc()
		}
		t := time.NewTimer(c.cfg.DNS.nextRefresh(rand.N[time.Duration]))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func resolveTargets(ctx context.Context, r Resolver, d *DNSConfig) ([]Host, error) {
	var hosts []Host
	var errs []error
	for _, tg := range d.Targets {
		if ip, err := netip.ParseAddr(tg.Name); err == nil {
			hosts = append(hosts, Host{Addr: netip.AddrPortFrom(ip.Unmap(), tg.Port), Healthy: tg.Healthy})
			continue
		}
		network := "ip"
		if d.V4Only {
			network = "ip4"
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := r.LookupNetIP(qctx, network, strings.TrimSuffix(tg.Name, "."))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("resolve %s: %w", tg.Name, err))
			continue
		}
		for _, ip := range ips {
			hosts = append(hosts, Host{Addr: netip.AddrPortFrom(ip.Unmap(), tg.Port), Healthy: tg.Healthy})
		}
	}
	return hosts, errors.Join(errs...)
}
