// Package listener is the proxy's listener manager: it compiles Envoy Listener resources,
// binds the listeners that own a port, accepts connections, hands connections redirected
// by iptables to the listener of their original destination (use_original_dst), picks a
// filter chain in Envoy's order and runs its network filter (tcp_proxy or the HTTP
// connection manager).
package listener

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3" // registers the config type
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"   // registers the config type
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"  // registers the config type
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/rbac"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/setstate"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tcpproxy"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// OriginalDstFilterName is the listener filter that restores the original destination.
const OriginalDstFilterName = "envoy.filters.listener.original_dst"

var listenerAllow = fieldcheck.Allow{
	"envoy.config.listener.v3.Listener": {
		"name", "address", "filter_chains", "use_original_dst", "listener_filters", "traffic_direction",
		"default_filter_chain", "bind_to_port", "stat_prefix", "metadata",
		"continue_on_listener_filters_timeout", "listener_filters_timeout", "access_log",
		// max_connections_to_accept_per_socket_event bounds how many connections Envoy's
		// event loop accepts per wakeup before serving others; the proxy's accept loop
		// hands each connection to its own goroutine at once, so the bound shapes no
		// observable order or latency here.
		"max_connections_to_accept_per_socket_event",
		// ignore_global_conn_limit and bypass_overload_manager exempt a listener from
		// Envoy's global connection limit and overload manager, neither of which the proxy
		// has: every listener already behaves as exempt.
		"ignore_global_conn_limit", "bypass_overload_manager",
		"internal_listener", "filter_chain_matcher",
		// connection_balance_config with exact_balance spreads accepted connections evenly
		// over Envoy's worker threads, each of which owns its connections; the proxy has
		// one accept loop handing every connection to its own goroutine on a shared
		// scheduler, so every connection is already "balanced" and the knob has no
		// observable effect (extend_balance, a named balancer, is refused).
		"connection_balance_config",
	},
	"envoy.config.listener.v3.Listener.ConnectionBalanceConfig":              {"exact_balance"},
	"envoy.config.listener.v3.Listener.ConnectionBalanceConfig.ExactBalance": {},
	"envoy.config.listener.v3.Listener.InternalListenerConfig":               {},
	"envoy.config.listener.v3.FilterChain":                                   {"filter_chain_match", "filters", "name", "metadata", "transport_socket", "transport_socket_connect_timeout"},
	"envoy.config.listener.v3.FilterChainMatch": {
		"destination_port", "prefix_ranges", "source_prefix_ranges",
		"transport_protocol", "application_protocols", "server_names",
	},
	"envoy.config.core.v3.TransportSocket":                                {"name", "typed_config"},
	"envoy.config.core.v3.CidrRange":                                      {"address_prefix", "prefix_len"},
	"envoy.config.listener.v3.Filter":                                     {"name", "typed_config"},
	"envoy.config.listener.v3.ListenerFilter":                             {"name", "typed_config", "filter_disabled"},
	"envoy.config.listener.v3.ListenerFilterChainMatchPredicate":          {"or_match", "and_match", "not_match", "any_match", "destination_port_range"},
	"envoy.config.listener.v3.ListenerFilterChainMatchPredicate.MatchSet": {"rules"},
	"envoy.type.v3.Int32Range":                                            {"start", "end"},
}.Merge(cluster.AddressAllow)

// Config is a compiled listener. Immutable.
type Config struct {
	Name string
	Addr netip.AddrPort // invalid for an internal listener
	// Internal is internal_listener: the listener has no socket; endpoints whose
	// envoy_internal_address names it connect to it inside the proxy (internalconn).
	Internal          bool
	BindToPort        bool
	UseOriginalDst    bool
	OriginalDstFilter bool
	Inbound           bool
	StatName          string // listener.<StatName>.*
	Chains            []*FilterChain
	Default           *FilterChain
	// Matcher is filter_chain_matcher (unified.go): when set it picks the chain by name
	// and the chains' filter_chain_match is not consulted; nil without it.
	Matcher       *chainMatcher
	TLSInspector  bool // envoy.filters.listener.tls_inspector
	HTTPInspector bool // envoy.filters.listener.http_inspector
	// TLSInspectorOff and HTTPInspectorOff are the inspectors' filter_disabled
	// predicates: the inspector skips a connection they match; nil matches none.
	TLSInspectorOff  *Predicate
	HTTPInspectorOff *Predicate
	// AccessLogs are the listener's access_log: written for a connection the listener
	// closes itself (no filter chain match, flag NR), as Envoy's listener access log.
	AccessLogs     []*accesslog.Logger
	FiltersTimeout time.Duration // listener_filters_timeout (Envoy's default 15 s; 0 disables)
	// Digest identifies the Listener resource this was compiled from (a hash of
	// OuterDigest and its chains' digests in order): an LDS update that leaves it unchanged does not drain connections.
	Digest [sha256.Size]byte
	// OuterDigest identifies the listener without its filter chains: an update that keeps
	// it is a filter-chain-only update, which drains only the connections of the chains
	// it changed or removed (Envoy's in-place filter chain update).
	OuterDigest [sha256.Size]byte
}

// FilterChain is a compiled filter chain with its match and its one terminal filter.
type FilterChain struct {
	Name           string
	DstPort        uint32 // 0: any
	Prefixes       []netip.Prefix
	SourcePrefixes []netip.Prefix
	// TransportProtocol is "tls", "raw_buffer" or "" (any); ALPN and ServerNames are
	// application_protocols and server_names.
	TransportProtocol string
	ALPN              []string
	ServerNames       []string
	TLS               *tlsctx.Context // the DownstreamTlsContext; nil for plaintext
	// ConnectTimeout is transport_socket_connect_timeout: the TLS handshake must end
	// within it (0: no limit).
	ConnectTimeout time.Duration
	// RBAC are the envoy.filters.network.rbac filters before the terminal filter.
	RBAC []*rbac.NetworkConfig
	// MX is the istio.metadata_exchange network filter, nil without it.
	MX *peer.MX
	// IstioStats is the istio.stats network filter (TCP metrics), nil without it.
	IstioStats *istiostats.Config
	// SetState are the envoy.filters.network.set_filter_state filters, in chain order:
	// they set the connection's filter state when it is accepted.
	SetState []*setstate.Config
	TCP      *tcpproxy.Config
	HTTP     *httpconn.Config
	// Digest identifies the FilterChain resource (its deterministic encoding).
	Digest [sha256.Size]byte
}

// Compile validates l and compiles it, or returns an error naming the resource and the
// field the proxy does not implement.
func Compile(l *listenerv3.Listener) (*Config, error) {
	if l == nil {
		return nil, errors.New("listener is empty")
	}
	cfg, err := compile(l)
	if err != nil {
		return nil, fmt.Errorf("listener '%s': %w", l.GetName(), err)
	}
	// The chains are encoded once: the listener's digest is made of its outer part's and
	// its chains' (a deep copy and a second encoding of every chain were a tenth of
	// compiling a sidecar's listeners).
	if cfg.OuterDigest, err = digest(outerOf(l)); err != nil {
		return nil, fmt.Errorf("listener '%s': %w", l.GetName(), err)
	}
	whole := sha256.New()
	whole.Write(cfg.OuterDigest[:])
	for i, fc := range l.GetFilterChains() {
		if cfg.Chains[i].Digest, err = digest(fc); err != nil {
			return nil, fmt.Errorf("listener '%s': filter_chains[%d]: %w", l.GetName(), i, err)
		}
		whole.Write([]byte{'c'})
		whole.Write(cfg.Chains[i].Digest[:])
	}
	if cfg.Default != nil {
		if cfg.Default.Digest, err = digest(l.GetDefaultFilterChain()); err != nil {
			return nil, fmt.Errorf("listener '%s': default_filter_chain: %w", l.GetName(), err)
		}
		whole.Write([]byte{'d'})
		whole.Write(cfg.Default.Digest[:])
	}
	whole.Sum(cfg.Digest[:0])
	return cfg, nil
}

// outerOf returns a shallow copy of l without its filter chains, for OuterDigest; it
// shares l's other fields and must not be changed.
func outerOf(l *listenerv3.Listener) *listenerv3.Listener {
	out := &listenerv3.Listener{}
	src, dst := l.ProtoReflect(), out.ProtoReflect()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Name() != "filter_chains" && fd.Name() != "default_filter_chain" {
			dst.Set(fd, v)
		}
		return true
	})
	dst.SetUnknown(src.GetUnknown())
	return out
}

// digest hashes the deterministic encoding of m.
func digest(m proto.Message) ([sha256.Size]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}

func compile(l *listenerv3.Listener) (*Config, error) {
	if err := l.ValidateAll(); err != nil {
		return nil, err
	}
	if err := listenerAllow.Check(l); err != nil {
		return nil, err
	}
	internal := l.GetInternalListener() != nil
	var addr netip.AddrPort
	var err error
	switch {
	case internal && l.GetAddress() != nil && l.GetAddress().GetEnvoyInternalAddress() == nil:
		return nil, errors.New("address: an internal listener's address must be an envoy_internal_address")
	case internal:
		if n := l.GetAddress().GetEnvoyInternalAddress().GetServerListenerName(); n != "" && n != l.GetName() {
			return nil, fmt.Errorf("address.envoy_internal_address.server_listener_name: %s is not the listener's name", n)
		}
	default:
		sa := l.GetAddress().GetSocketAddress()
		if sa == nil {
			return nil, errors.New("address: only socket addresses are supported")
		}
		if addr, err = cluster.SocketAddr(sa); err != nil {
			return nil, fmt.Errorf("address.%w", err)
		}
	}
	cfg := &Config{
		Name:           l.GetName(),
		Addr:           addr,
		Internal:       internal,
		BindToPort:     !internal && (l.GetBindToPort() == nil || l.GetBindToPort().GetValue()),
		UseOriginalDst: l.GetUseOriginalDst().GetValue(),
		Inbound:        l.GetTrafficDirection() == corev3.TrafficDirection_INBOUND,
		StatName:       listenerStatName(internal, l.GetName(), addr),
		FiltersTimeout: 15 * time.Second,
	}
	if d := l.GetListenerFiltersTimeout(); d != nil {
		cfg.FiltersTimeout = d.AsDuration()
	}
	if l.GetStatPrefix() != "" {
		cfg.StatName = l.GetStatPrefix()
	}
	for i, lf := range l.GetListenerFilters() {
		name, err := checkListenerFilter(lf)
		if err != nil {
			return nil, fmt.Errorf("listener_filters[%d].%w", i, err)
		}
		off, err := compilePredicate(lf.GetFilterDisabled())
		if err != nil {
			return nil, fmt.Errorf("listener_filters[%d].filter_disabled.%w", i, err)
		}
		switch name {
		case OriginalDstFilterName:
			if off != nil {
				return nil, fmt.Errorf("listener_filters[%d].filter_disabled: not supported by meshlab proxy for %s", i, name)
			}
			cfg.OriginalDstFilter = true
		case tlsctx.InspectorName:
			cfg.TLSInspector, cfg.TLSInspectorOff = true, off
		case HTTPInspectorName:
			cfg.HTTPInspector, cfg.HTTPInspectorOff = true, off
		}
	}
	if cfg.AccessLogs, err = accesslog.Compile(l.GetAccessLog()); err != nil {
		return nil, err
	}
	for i, fc := range l.GetFilterChains() {
		c, err := compileChain(fc)
		if err != nil {
			return nil, fmt.Errorf("filter_chains[%d].%w", i, err)
		}
		cfg.Chains = append(cfg.Chains, c)
	}
	if fcm := l.GetFilterChainMatcher(); fcm != nil {
		names := map[string]bool{}
		for i, fc := range l.GetFilterChains() {
			if fc.GetName() == "" || names[fc.GetName()] {
				return nil, fmt.Errorf("filter_chains[%d].name: with filter_chain_matcher every filter chain needs a unique name", i)
			}
			names[fc.GetName()] = true
		}
		if cfg.Matcher, err = compileChainMatcher(fcm, names); err != nil {
			return nil, fmt.Errorf("filter_chain_matcher.%w", err)
		}
	} else if err := checkChainMatches(l.GetFilterChains()); err != nil {
		return nil, err
	}
	if dfc := l.GetDefaultFilterChain(); dfc != nil {
		c, err := compileChain(dfc)
		if err != nil {
			return nil, fmt.Errorf("default_filter_chain.%w", err)
		}
		cfg.Default = c
	}
	return cfg, nil
}

// listenerStatName names a listener's stats: its address as Envoy's, or for an internal
// listener (no socket address) its name, as Envoy's stat prefix for an envoy internal
// address is the listener name.
func listenerStatName(internal bool, name string, addr netip.AddrPort) string {
	if internal {
		return stats.ListenerStatName(name)
	}
	return stats.ListenerStatName(addr.String())
}

// HTTPInspectorName is the listener filter that detects plaintext HTTP/1.x and h2c.
const HTTPInspectorName = "envoy.filters.listener.http_inspector"

// listenerFilterTypes maps each implemented listener filter's config type to its name.
var listenerFilterTypes = map[protoreflect.FullName]string{
	"envoy.extensions.filters.listener.original_dst.v3.OriginalDst":     OriginalDstFilterName,
	"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector":   tlsctx.InspectorName,
	"envoy.extensions.filters.listener.http_inspector.v3.HttpInspector": HTTPInspectorName,
}

// listenerFilterAllow accepts the three filters' configs with no field set.
var listenerFilterAllow = fieldcheck.Allow{
	"envoy.extensions.filters.listener.original_dst.v3.OriginalDst": {},
	// initial_read_buffer_size is how many bytes Envoy first peeks for the ClientHello
	// before growing its buffer; the proxy's inspector reads until the ClientHello is
	// complete whatever its size, so the starting size has no observable effect.
	"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector":   {"initial_read_buffer_size"},
	"envoy.extensions.filters.listener.http_inspector.v3.HttpInspector": {},
}

// checkListenerFilter returns the name of the implemented listener filter lf configures.
func checkListenerFilter(lf *listenerv3.ListenerFilter) (string, error) {
	tc := lf.GetTypedConfig()
	if tc == nil {
		for _, n := range listenerFilterTypes {
			if lf.GetName() == n {
				return n, nil
			}
		}
		return "", fmt.Errorf("name: unsupported listener filter %s", lf.GetName())
	}
	name, ok := listenerFilterTypes[tc.MessageName()]
	if !ok {
		return "", fmt.Errorf("typed_config: unsupported type %s", tc.MessageName())
	}
	m, err := tc.UnmarshalNew()
	if err != nil {
		return "", fmt.Errorf("typed_config: %w", err)
	}
	if err := listenerFilterAllow.Check(m); err != nil {
		return "", fmt.Errorf("typed_config.%w", err)
	}
	return name, nil
}

func compileChain(fc *listenerv3.FilterChain) (*FilterChain, error) {
	c := &FilterChain{Name: fc.GetName()}
	if d := fc.GetTransportSocketConnectTimeout(); d != nil {
		c.ConnectTimeout = d.AsDuration()
	}
	m := fc.GetFilterChainMatch()
	c.DstPort = m.GetDestinationPort().GetValue()
	c.TransportProtocol = m.GetTransportProtocol()
	if c.TransportProtocol != "" && c.TransportProtocol != "tls" && c.TransportProtocol != "raw_buffer" {
		return nil, fmt.Errorf("filter_chain_match.transport_protocol: unknown transport protocol %q", c.TransportProtocol)
	}
	c.ALPN = m.GetApplicationProtocols()
	c.ServerNames = m.GetServerNames()
	var err error
	if c.TLS, err = tlsctx.Compile(fc.GetTransportSocket(), true); err != nil {
		return nil, fmt.Errorf("transport_socket.%w", err)
	}
	if c.Prefixes, err = prefixes(m.GetPrefixRanges()); err != nil {
		return nil, fmt.Errorf("filter_chain_match.prefix_ranges: %w", err)
	}
	if c.SourcePrefixes, err = prefixes(m.GetSourcePrefixRanges()); err != nil {
		return nil, fmt.Errorf("filter_chain_match.source_prefix_ranges: %w", err)
	}
	filters := fc.GetFilters()
	if len(filters) == 0 {
		return nil, errors.New("filters: a terminal network filter (tcp_proxy or http_connection_manager) is required")
	}
	last := len(filters) - 1
	for i, f := range filters[:last] {
		if err := c.compileNetworkFilter(f); err != nil {
			return nil, fmt.Errorf("filters[%d]%w", i, err)
		}
	}
	tc := filters[last].GetTypedConfig()
	if tc == nil {
		return nil, fmt.Errorf("filters[%d].typed_config: required", last)
	}
	switch tc.MessageName() {
	case "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":
		c.TCP, err = tcpproxy.Compile(tc)
	case "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager":
		c.HTTP, err = httpconn.Compile(tc)
	default:
		return nil, fmt.Errorf("filters[%d].typed_config: unsupported type %s", last, tc.MessageName())
	}
	if err != nil {
		return nil, fmt.Errorf("filters[%d].typed_config: %w", last, err)
	}
	return c, nil
}

// compileNetworkFilter compiles one network filter before the terminal filter:
// envoy.filters.network.rbac, envoy.filters.network.set_filter_state,
// istio.metadata_exchange or istio.stats. The error starts
// with the field path below the filter (".typed_config...") or ": ".
func (c *FilterChain) compileNetworkFilter(f *listenerv3.Filter) error {
	tc := f.GetTypedConfig()
	if tc == nil {
		return fmt.Errorf(".typed_config: required (filter %s)", f.GetName())
	}
	typeName := string(tc.MessageName())
	if name, _, ok, err := peer.TypedStruct(tc); err != nil {
		return fmt.Errorf(".typed_config: %w", err)
	} else if ok {
		typeName = name
	}
	switch typeName {
	case rbac.NetworkConfigType:
		r, err := rbac.CompileNetwork(tc)
		if err != nil {
			return fmt.Errorf(".typed_config.%w", err)
		}
		c.RBAC = append(c.RBAC, r)
	case peer.MXConfigType:
		if c.MX != nil {
			return errors.New(": only one istio.metadata_exchange filter per chain is supported by meshlab proxy")
		}
		mx, err := peer.CompileMX(tc, false)
		if err != nil {
			return fmt.Errorf(".%w", err)
		}
		c.MX = mx
	case setstate.NetworkConfigType:
		st, err := setstate.CompileNetwork(tc)
		if err != nil {
			return fmt.Errorf(".%w", err)
		}
		c.SetState = append(c.SetState, st)
	case istiostats.ConfigType:
		if c.IstioStats != nil {
			return errors.New(": only one istio.stats filter per chain is supported by meshlab proxy")
		}
		st, err := istiostats.Compile(tc)
		if err != nil {
			return fmt.Errorf(".%w", err)
		}
		c.IstioStats = st
	default:
		return fmt.Errorf(": only envoy.filters.network.rbac, envoy.filters.network.set_filter_state, istio.metadata_exchange and istio.stats are supported before the terminal filter, not %s (%s)", f.GetName(), typeName)
	}
	return nil
}

func prefixes(rs []*corev3.CidrRange) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, r := range rs {
		ip, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return nil, fmt.Errorf("malformed IP address: %s", r.GetAddressPrefix())
		}
		ip = ip.Unmap()
		bits := ip.BitLen()
		if r.GetPrefixLen() != nil {
			bits = int(r.GetPrefixLen().GetValue())
		}
		p, err := ip.Prefix(bits)
		if err != nil {
			return nil, fmt.Errorf("prefix %s/%d: %w", ip, bits, err)
		}
		out = append(out, p)
	}
	return out, nil
}
