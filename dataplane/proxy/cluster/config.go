// Package cluster is the proxy's cluster manager: it turns Envoy Cluster and
// ClusterLoadAssignment resources into upstream host sets (STATIC, EDS, STRICT_DNS,
// ORIGINAL_DST), picks a host (ROUND_ROBIN, LEAST_REQUEST, RANDOM with Envoy's panic
// threshold, or the downstream's original destination), dials it with the cluster's
// connect timeout and bind address, pools upstream HTTP/1.1 connections
// (max_requests_per_connection) or multiplexes HTTP/2 streams on shared connections, and
// applies circuit breakers and outlier detection with Envoy's semantics and stat names.
package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// Type is the service discovery type of a cluster.
type Type int

// Supported cluster types.
const (
	TypeStatic Type = iota
	TypeEDS
	TypeOriginalDst
	TypeStrictDNS
)

// String returns Envoy's name of the type.
func (t Type) String() string {
	switch t {
	case TypeEDS:
		return "EDS"
	case TypeOriginalDst:
		return "ORIGINAL_DST"
	case TypeStrictDNS:
		return "STRICT_DNS"
	}
	return "STATIC"
}

// DefaultConnectTimeout is Envoy's connect_timeout when the field is unset.
const DefaultConnectTimeout = 5 * time.Second

// Config is a validated cluster the proxy implements.
type Config struct {
	Proto          *clusterv3.Cluster
	Name           string
	Type           Type
	ServiceName    string // EDS: the ClusterLoadAssignment name to subscribe to
	ConnectTimeout time.Duration
	BindSource     netip.Addr // invalid when no upstream_bind_config
	Static         []Host     // STATIC: hosts from load_assignment
	LB             LBPolicy
	// PanicThreshold is common_lb_config.healthy_panic_threshold in percent (default 50):
	// below it the load balancer ignores health and uses every host.
	PanicThreshold float64
	Thresholds     Thresholds     // circuit_breakers, default priority
	Outlier        *OutlierConfig // nil without outlier_detection
	// MaxRequestsPerConnection closes an upstream connection after this many requests
	// (0: unlimited).
	MaxRequestsPerConnection uint32
	// IdleTimeout closes idle upstream connections (common_http_protocol_options.idle_timeout,
	// Envoy's default 1h).
	IdleTimeout time.Duration
	DNS         *DNSConfig // STRICT_DNS: the names to resolve
	// TLS is the transport_socket's UpstreamTlsContext; nil for plaintext.
	TLS *tlsctx.Context
	// SocketMatches are transport_socket_matches, chosen per endpoint (see Transport).
	SocketMatches []SocketMatch
	// HTTP2 is set when the cluster speaks HTTP/2 upstream (explicit_http_config's
	// http2_protocol_options or the legacy http2_protocol_options): h2 over TLS, h2c
	// with prior knowledge otherwise.
	HTTP2 bool
	// DownstreamHTTP2 is use_downstream_protocol_config with http2_protocol_options: a
	// request that arrived over HTTP/2 goes upstream over HTTP/2, the others over HTTP/1.1.
	DownstreamHTTP2 bool
	// KeepAlive is upstream_connection_options.tcp_keepalive: TCP keepalive on upstream
	// connections with these settings (zero fields: the kernel's); nil: off.
	KeepAlive *net.KeepAliveConfig
	// StatName names the cluster's stats (cluster.<StatName>.*): alt_stat_name, else
	// the name.
	StatName string
	// MX is the upstream istio.metadata_exchange cluster filter (the cluster's only
	// supported upstream network filter), nil without it.
	MX *peer.MX
	// OrigDst is original_dst_lb_config (ORIGINAL_DST only); nil without it.
	OrigDst *OrigDstLB
	// Passthrough is set when the transport socket is internal_upstream: the metadata
	// namespaces its passthrough_metadata hands an internal listener's downstream.
	Passthrough *Passthrough
	// Metadata is the cluster's filter_metadata (for passthrough of kind cluster).
	Metadata map[string]*structpb.Struct
}

// OrigDstLB is an ORIGINAL_DST cluster's original_dst_lb_config: the host is the
// downstream's dynamic metadata value at MetadataKey ("ip:port") when there is one, else
// the original destination; PortOverride (when not 0) replaces the host's port.
type OrigDstLB struct {
	PortOverride uint32
	// MetadataNS and MetadataPath are metadata_key: the filter namespace and the path of
	// keys in it; MetadataNS "" for none.
	MetadataNS   string
	MetadataPath []string
}

// Passthrough is an internal_upstream transport socket's passthrough_metadata: the
// namespaces of the host's and of the cluster's filter_metadata given, as dynamic
// metadata, to the internal listener the connection reaches.
type Passthrough struct {
	Host, Cluster []string
}

// AddressAllow lists the address fields the proxy implements.
var AddressAllow = fieldcheck.Allow{
	"envoy.config.core.v3.Address": {"socket_address", "pipe", "envoy_internal_address"},
	// An internal address names an internal listener of this proxy (internalconn).
	"envoy.config.core.v3.EnvoyInternalAddress": {"server_listener_name", "endpoint_id"},
	"envoy.config.core.v3.SocketAddress":        {"address", "port_value", "protocol"},
	"envoy.config.core.v3.Pipe":                 {"path", "mode"},
}

// ConfigSourceAllow lists the config source fields the proxy implements (ADS only).
var ConfigSourceAllow = fieldcheck.Allow{
	"envoy.config.core.v3.ConfigSource": {"ads", "resource_api_version", "initial_fetch_timeout"},
}

var clusterAllow = fieldcheck.Allow{
	"envoy.config.cluster.v3.Cluster": {
		"name", "type", "eds_cluster_config", "connect_timeout", "lb_policy",
		"load_assignment", "upstream_bind_config", "metadata",
		"typed_extension_protocol_options", "http2_protocol_options",
		"circuit_breakers", "outlier_detection", "common_lb_config", "max_requests_per_connection",
		"dns_lookup_family", "dns_refresh_rate", "dns_jitter", "respect_dns_ttl", "typed_dns_resolver_config", "transport_socket",
		"transport_socket_matches", "alt_stat_name", "cleanup_interval", "upstream_connection_options",
		"filters", "original_dst_lb_config",
	},
	"envoy.config.cluster.v3.Cluster.OriginalDstLbConfig":  {"upstream_port_override", "metadata_key"},
	"envoy.type.metadata.v3.MetadataKey":                   {"key", "path"},
	"envoy.type.metadata.v3.MetadataKey.PathSegment":       {"key"},
	"envoy.config.cluster.v3.Filter":                       {"name", "typed_config"},
	"envoy.config.core.v3.TypedExtensionConfig":            {"name", "typed_config"},
	"envoy.config.cluster.v3.UpstreamConnectionOptions":    {"tcp_keepalive"},
	"envoy.config.core.v3.TcpKeepalive":                    {"keepalive_probes", "keepalive_time", "keepalive_interval"},
	"envoy.config.cluster.v3.Cluster.TransportSocketMatch": {"name", "match", "transport_socket"},
	"envoy.config.core.v3.TransportSocket":                 {"name", "typed_config"},
	"envoy.config.cluster.v3.Cluster.CommonLbConfig":       {"healthy_panic_threshold"},
	"envoy.config.cluster.v3.Cluster.EdsClusterConfig":     {"eds_config", "service_name"},
	"envoy.config.core.v3.BindConfig":                      {"source_address"},
	"envoy.config.core.v3.Http2ProtocolOptions":            {},
}.Merge(AddressAllow, ConfigSourceAllow, loadAssignmentAllow, circuitBreakersAllow, outlierAllow)

var loadAssignmentAllow = fieldcheck.Allow{
	"envoy.config.endpoint.v3.ClusterLoadAssignment": {"cluster_name", "endpoints"},
	"envoy.config.endpoint.v3.LocalityLbEndpoints":   {"locality", "lb_endpoints", "load_balancing_weight", "priority"},
	"envoy.config.endpoint.v3.LbEndpoint":            {"endpoint", "health_status", "metadata", "load_balancing_weight"},
	"envoy.config.endpoint.v3.Endpoint":              {"address", "hostname"},
}.Merge(AddressAllow)

var protocolOptionsAllow = fieldcheck.Allow{
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions":                         {"explicit_http_config", "common_http_protocol_options", "use_downstream_protocol_config"},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.UseDownstreamHttpConfig": {"http_protocol_options", "http2_protocol_options"},
	"envoy.config.core.v3.HttpProtocolOptions":                                       {"max_requests_per_connection", "idle_timeout"},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig":      {"http_protocol_options", "http2_protocol_options"},
	"envoy.config.core.v3.Http1ProtocolOptions":                                      {},
	// allow_connect lets CONNECT streams go out on the cluster's HTTP/2 connections, as
	// tcp_proxy's tunneling_config sends them (tcpproxy/tunnel.go).
	"envoy.config.core.v3.Http2ProtocolOptions": {"allow_connect"},
}

const httpProtocolOptionsName = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// Compile validates c and returns the cluster the proxy will run, or an error naming the
// field it does not implement.
func Compile(c *clusterv3.Cluster) (*Config, error) {
	if c == nil {
		return nil, errors.New("cluster is empty")
	}
	if err := c.ValidateAll(); err != nil {
		return nil, fmt.Errorf("cluster '%s': %w", c.GetName(), err)
	}
	if err := clusterAllow.Check(c); err != nil {
		return nil, fmt.Errorf("cluster '%s': %w", c.GetName(), err)
	}
	cfg := &Config{Proto: c, Name: c.GetName(), StatName: c.GetName(), ConnectTimeout: DefaultConnectTimeout, IdleTimeout: time.Hour}
	if c.GetAltStatName() != "" {
		cfg.StatName = c.GetAltStatName()
	}
	if ka := c.GetUpstreamConnectionOptions().GetTcpKeepalive(); ka != nil {
		cfg.KeepAlive = &net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}
		if v := ka.GetKeepaliveTime(); v != nil {
			cfg.KeepAlive.Idle = time.Duration(v.GetValue()) * time.Second
		}
		if v := ka.GetKeepaliveInterval(); v != nil {
			cfg.KeepAlive.Interval = time.Duration(v.GetValue()) * time.Second
		}
		if v := ka.GetKeepaliveProbes(); v != nil {
			cfg.KeepAlive.Count = int(v.GetValue())
		}
	}
	// cleanup_interval is when an ORIGINAL_DST cluster forgets hosts no connection used
	// since the last sweep. This proxy keeps no host set for ORIGINAL_DST clusters (each
	// pick is the connection's original destination and /clusters lists none), so there
	// is never a host to forget: every interval behaves alike.
	_ = c.GetCleanupInterval()
	if err := cfg.fill(c); err != nil {
		return nil, fmt.Errorf("cluster '%s': %w", c.GetName(), err)
	}
	return cfg, nil
}

func (cfg *Config) fill(c *clusterv3.Cluster) error {
	for name, a := range c.GetTypedExtensionProtocolOptions() {
		if name != httpProtocolOptionsName {
			return fmt.Errorf("typed_extension_protocol_options[%s]: unsupported extension", name)
		}
		var opts httpv3.HttpProtocolOptions
		if err := a.UnmarshalTo(&opts); err != nil {
			return fmt.Errorf("typed_extension_protocol_options[%s]: %w", name, err)
		}
		if err := opts.ValidateAll(); err != nil {
			return fmt.Errorf("typed_extension_protocol_options[%s]: %w", name, err)
		}
		if err := protocolOptionsAllow.Check(&opts); err != nil {
			return fmt.Errorf("typed_extension_protocol_options[%s].%w", name, err)
		}
		if d := opts.GetCommonHttpProtocolOptions().GetIdleTimeout(); d != nil {
			cfg.IdleTimeout = d.AsDuration()
		}
		if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil {
			cfg.HTTP2 = true
		}
		if opts.GetUseDownstreamProtocolConfig().GetHttp2ProtocolOptions() != nil {
			cfg.DownstreamHTTP2 = true
		}
		if m := opts.GetCommonHttpProtocolOptions().GetMaxRequestsPerConnection(); m != nil {
			cfg.MaxRequestsPerConnection = m.GetValue()
		}
	}
	if c.GetHttp2ProtocolOptions() != nil { //nolint:staticcheck // Envoy still honours the deprecated http2_protocol_options
		cfg.HTTP2 = true
	}
	if m := c.GetMaxRequestsPerConnection(); m != nil && cfg.MaxRequestsPerConnection == 0 { //nolint:staticcheck // Envoy still honours the deprecated field
		cfg.MaxRequestsPerConnection = m.GetValue()
	}
	cfg.PanicThreshold = 50
	if p := c.GetCommonLbConfig().GetHealthyPanicThreshold(); p != nil {
		cfg.PanicThreshold = p.GetValue()
	}
	cfg.Thresholds = thresholdsFrom(c.GetCircuitBreakers())
	if od := c.GetOutlierDetection(); od != nil {
		if v := od.GetEnforcingSuccessRate(); v != nil && v.GetValue() != 0 {
			return errors.New("outlier_detection.enforcing_success_rate: only 0 is supported by meshlab proxy (success rate ejection is not implemented)")
		}
		if v := od.GetEnforcingFailurePercentage(); v != nil && v.GetValue() != 0 {
			return errors.New("outlier_detection.enforcing_failure_percentage: only 0 is supported by meshlab proxy")
		}
		cfg.Outlier = outlierFrom(od)
	}
	for i, f := range c.GetFilters() {
		if f.GetTypedConfig() == nil {
			return fmt.Errorf("filters[%d].typed_config: required", i)
		}
		if cfg.MX != nil {
			return fmt.Errorf("filters[%d]: only one istio.metadata_exchange upstream filter is supported by meshlab proxy", i)
		}
		mx, err := peer.CompileMX(f.GetTypedConfig(), true)
		if err != nil {
			return fmt.Errorf("filters[%d]: only istio.metadata_exchange is supported by meshlab proxy: %w", i, err)
		}
		cfg.MX = mx
	}
	ts := c.GetTransportSocket()
	if pt, inner, err := compileInternalUpstream(ts); err != nil {
		return fmt.Errorf("transport_socket.%w", err)
	} else if pt != nil {
		cfg.Passthrough, ts = pt, inner
	}
	tc, err := tlsctx.Compile(ts, false)
	if err != nil {
		return fmt.Errorf("transport_socket.%w", err)
	}
	// A TLS transport socket inside internal_upstream (istiod's inner_connect_originate)
	// runs its handshake over the in-memory connection to the internal listener, as
	// Envoy's internal upstream wraps the inner socket: Dial handshakes whatever
	// connection it made.
	cfg.TLS = tc
	cfg.Metadata = c.GetMetadata().GetFilterMetadata()
	if cfg.SocketMatches, err = compileSocketMatches(c.GetTransportSocketMatches()); err != nil {
		return err
	}
	if d := c.GetConnectTimeout(); d != nil {
		cfg.ConnectTimeout = d.AsDuration()
	}
	if c.GetOriginalDstLbConfig() != nil && c.GetType() != clusterv3.Cluster_ORIGINAL_DST {
		return errors.New("original_dst_lb_config: only for ORIGINAL_DST clusters")
	}
	switch c.GetType() {
	case clusterv3.Cluster_STATIC:
		cfg.Type = TypeStatic
	case clusterv3.Cluster_EDS:
		cfg.Type = TypeEDS
		cfg.ServiceName = c.GetEdsClusterConfig().GetServiceName()
		if cfg.ServiceName == "" {
			cfg.ServiceName = c.GetName()
		}
		if src := c.GetEdsClusterConfig().GetEdsConfig(); src == nil || src.GetAds() == nil {
			return errors.New("eds_cluster_config.eds_config: only ads config sources are supported")
		}
	case clusterv3.Cluster_ORIGINAL_DST:
		cfg.Type = TypeOriginalDst
		if lb := c.GetOriginalDstLbConfig(); lb != nil {
			cfg.OrigDst = &OrigDstLB{PortOverride: lb.GetUpstreamPortOverride().GetValue(), MetadataNS: lb.GetMetadataKey().GetKey()}
			for _, seg := range lb.GetMetadataKey().GetPath() {
				cfg.OrigDst.MetadataPath = append(cfg.OrigDst.MetadataPath, seg.GetKey())
			}
		}
	case clusterv3.Cluster_STRICT_DNS:
		cfg.Type = TypeStrictDNS
		if err := cfg.fillDNS(c); err != nil {
			return err
		}
	default:
		if c.GetClusterType() != nil {
			return errors.New("cluster_type: field is not supported by meshlab proxy")
		}
		return fmt.Errorf("type: unsupported cluster type %s", c.GetType())
	}
	if err := checkLBPolicy(cfg.Type, c.GetLbPolicy()); err != nil {
		return err
	}
	cfg.LB = lbPolicyFrom(c.GetLbPolicy())
	if bind := c.GetUpstreamBindConfig(); bind != nil {
		sa := bind.GetSourceAddress()
		ip, err := netip.ParseAddr(sa.GetAddress())
		if err != nil {
			return fmt.Errorf("upstream_bind_config.source_address.address: %w", err)
		}
		if sa.GetPortValue() != 0 {
			return errors.New("upstream_bind_config.source_address.port_value: only port 0 is supported")
		}
		cfg.BindSource = ip
	}
	if la := c.GetLoadAssignment(); la != nil && cfg.Type != TypeStrictDNS {
		if cfg.Type != TypeStatic {
			return fmt.Errorf("load_assignment: not allowed for cluster type %s", cfg.Type)
		}
		hosts, err := HostsFromAssignment(la)
		if err != nil {
			return fmt.Errorf("load_assignment.%w", err)
		}
		cfg.Static = hosts
	}
	return nil
}

// checkLBPolicy refuses the combinations Envoy refuses.
func checkLBPolicy(t Type, p clusterv3.Cluster_LbPolicy) error {
	switch {
	case t == TypeOriginalDst && p != clusterv3.Cluster_CLUSTER_PROVIDED:
		return fmt.Errorf("lb_policy: LB policy %s is not valid for Cluster type ORIGINAL_DST. Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'", p)
	case t != TypeOriginalDst && p == clusterv3.Cluster_CLUSTER_PROVIDED:
		return fmt.Errorf("lb_policy: cluster: LB policy CLUSTER_PROVIDED is not valid for Cluster type %s", t)
	case t != TypeOriginalDst && p != clusterv3.Cluster_ROUND_ROBIN && p != clusterv3.Cluster_LEAST_REQUEST && p != clusterv3.Cluster_RANDOM:
		return fmt.Errorf("lb_policy: unsupported load balancing policy %s", p)
	}
	return nil
}

// CompileAssignment validates a ClusterLoadAssignment from EDS and returns its hosts.
func CompileAssignment(la *endpointv3.ClusterLoadAssignment) ([]Host, error) {
	if la == nil {
		return nil, errors.New("cluster load assignment is empty")
	}
	if err := la.ValidateAll(); err != nil {
		return nil, fmt.Errorf("cluster load assignment '%s': %w", la.GetClusterName(), err)
	}
	if err := loadAssignmentAllow.Check(la); err != nil {
		return nil, fmt.Errorf("cluster load assignment '%s': %w", la.GetClusterName(), err)
	}
	hosts, err := HostsFromAssignment(la)
	if err != nil {
		return nil, fmt.Errorf("cluster load assignment '%s': %w", la.GetClusterName(), err)
	}
	return hosts, nil
}

// HostsFromAssignment returns the hosts of an assignment; only priority 0 is supported.
func HostsFromAssignment(la *endpointv3.ClusterLoadAssignment) ([]Host, error) {
	var hosts []Host
	for i, loc := range la.GetEndpoints() {
		if loc.GetPriority() != 0 {
			return nil, fmt.Errorf("endpoints[%d].priority: only priority 0 is supported", i)
		}
		for j, lb := range loc.GetLbEndpoints() {
			h, err := HostFromAddress(lb.GetEndpoint().GetAddress())
			if err != nil {
				return nil, fmt.Errorf("endpoints[%d].lb_endpoints[%d].endpoint.address: %w", i, j, err)
			}
			h.Healthy = isHealthy(lb.GetHealthStatus())
			h.SocketMatch = socketMatchKey(lb.GetMetadata())
			h.Workload = lb.GetMetadata().GetFilterMetadata()["istio"].GetFields()["workload"].GetStringValue()
			if h.Internal.Listener != "" {
				h.Metadata = lb.GetMetadata()
			}
			hosts = append(hosts, h)
		}
	}
	return hosts, nil
}

func isHealthy(s corev3.HealthStatus) bool {
	return s == corev3.HealthStatus_UNKNOWN || s == corev3.HealthStatus_HEALTHY
}

// HostFromAddress converts an Envoy address (socket or pipe) to a Host.
func HostFromAddress(a *corev3.Address) (Host, error) {
	switch {
	case a.GetPipe() != nil:
		if a.GetPipe().GetPath() == "" {
			return Host{}, errors.New("pipe.path: empty")
		}
		return Host{Pipe: a.GetPipe().GetPath(), Healthy: true}, nil
	case a.GetSocketAddress() != nil:
		ap, err := SocketAddr(a.GetSocketAddress())
		if err != nil {
			return Host{}, err
		}
		return Host{Addr: ap, Healthy: true}, nil
	case a.GetEnvoyInternalAddress() != nil:
		ia := a.GetEnvoyInternalAddress()
		if ia.GetServerListenerName() == "" {
			return Host{}, errors.New("envoy_internal_address.server_listener_name: empty")
		}
		return Host{Internal: internalconn.Addr{Listener: ia.GetServerListenerName(), EndpointID: ia.GetEndpointId()}, Healthy: true}, nil
	}
	return Host{}, errors.New("address: neither socket_address, pipe nor envoy_internal_address is set")
}

// SocketAddr converts a TCP socket address with a literal IP to an AddrPort.
func SocketAddr(sa *corev3.SocketAddress) (netip.AddrPort, error) {
	if sa.GetProtocol() != corev3.SocketAddress_TCP {
		return netip.AddrPort{}, fmt.Errorf("socket_address.protocol: unsupported protocol %s", sa.GetProtocol())
	}
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("socket_address.address: malformed IP address: %s", sa.GetAddress())
	}
	if sa.GetNamedPort() != "" {
		return netip.AddrPort{}, errors.New("socket_address.named_port: field is not supported by meshlab proxy")
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(sa.GetPortValue())), nil
}

// MessageName returns the full proto name of a message type, used in errors.
func MessageName(m protoreflect.ProtoMessage) string {
	return string(m.ProtoReflect().Descriptor().FullName())
}
