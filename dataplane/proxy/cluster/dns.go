package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// DefaultDNSServer is where STRICT_DNS clusters send their queries: the pod agent's DNS
// proxy. Envoy would use the system resolver, but the proxy runs as uid 1337, whose DNS
// the capture rules do not redirect, and a lab pod has no other resolver to reach.
const DefaultDNSServer = "127.0.0.1:15053"

// DNSConfig is what a STRICT_DNS cluster resolves.
type DNSConfig struct {
	Targets     []DNSTarget
	RefreshRate time.Duration // dns_refresh_rate, default 5s
	V4Only      bool          // dns_lookup_family V4_ONLY
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
		t := time.NewTimer(c.cfg.DNS.RefreshRate)
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
