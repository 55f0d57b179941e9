// Package istiostats is istio-proxy's istio.stats filter (stats.PluginConfig, as an HTTP
// filter and as a network filter): Istio's standard metrics (istio_requests_total,
// istio_request_duration_milliseconds, istio_request_bytes, istio_response_bytes,
// istio_tcp_connections_opened_total / _closed_total, istio_tcp_sent_bytes_total /
// _received_bytes_total and the istio_build gauge) with Istio's labels, in the proxy's
// stats store under the istiocustom namespace, so /stats/prometheus exports them by
// their Istio names. Labels are computed as istio-proxy computes them: the local node
// on one side, the peer's metadata (exchanged over TCP or in HTTP headers, else the
// endpoint's istio metadata on the client side) and the TLS identities on the other.
package istiostats

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	statsapi "istio.io/api/envoy/extensions/stats"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// FilterName is the filter's name in Istio's listeners.
const FilterName = "istio.stats"

// ConfigType is the filter's config type.
const ConfigType = "stats.PluginConfig"

// Metric names, without the istiocustom namespace.
const (
	RequestsTotal        = "istio_requests_total"
	RequestDuration      = "istio_request_duration_milliseconds"
	RequestBytes         = "istio_request_bytes"
	ResponseBytes        = "istio_response_bytes"
	TCPOpened            = "istio_tcp_connections_opened_total"
	TCPClosed            = "istio_tcp_connections_closed_total"
	TCPSent              = "istio_tcp_sent_bytes_total"
	TCPReceived          = "istio_tcp_received_bytes_total"
	Build                = "istio_build"
	defaultTCPReportTime = 5 * time.Second
)

// shortNames are the metric names a MetricConfig uses ("requests_total").
var shortNames = map[string]string{
	"requests_total": RequestsTotal, "request_duration_milliseconds": RequestDuration,
	"request_bytes": RequestBytes, "response_bytes": ResponseBytes,
	"tcp_connections_opened_total": TCPOpened, "tcp_connections_closed_total": TCPClosed,
	"tcp_sent_bytes_total": TCPSent, "tcp_received_bytes_total": TCPReceived,
	"request_messages_total": "istio_request_messages_total", "response_messages_total": "istio_response_messages_total",
}

// standardTags are every tag istio-proxy's standard metrics carry.
var standardTags = map[string]bool{}

func init() {
	for _, t := range []string{"reporter", "source_workload", "source_workload_namespace", "source_principal",
		"source_app", "source_version", "source_canonical_service", "source_canonical_revision", "source_cluster",
		"destination_workload", "destination_workload_namespace", "destination_principal", "destination_app",
		"destination_version", "destination_service", "destination_service_name", "destination_service_namespace",
		"destination_canonical_service", "destination_canonical_revision", "destination_cluster", "request_protocol",
		"response_flags", "connection_security_policy", "response_code", "grpc_response_status"} {
		standardTags[t] = true
	}
}

var allow = fieldcheck.Allow{
	// stat_prefix, field_separator, value_separator, max_peer_cache_size and debug
	// belong to the retired Wasm plugin; istio-proxy's native filter reads none of
	// them, so they have no effect there either. rotation_interval and
	// graceful_deletion_interval recycle Envoy's stats scope to bound memory; the
	// metrics a scrape sees between rotations are the same.
	ConfigType: {"disable_host_header_fallback", "tcp_reporting_duration", "metrics", "reporter",
		"stat_prefix", "field_separator", "value_separator", "max_peer_cache_size", "debug",
		"rotation_interval", "graceful_deletion_interval"},
	"stats.MetricConfig": {"name", "tags_to_remove", "drop", "dimensions"},
}

// Config is a compiled istio.stats filter. Its settings are immutable; the cache of
// resolved metrics makes it safe for concurrent use, not read-only.
type Config struct {
	// Gateway is reporter SERVER_GATEWAY (a waypoint): reporter="waypoint", the source
	// from the downstream peer as an inbound sidecar's, the destination from the upstream
	// peer (the workload the request went to) instead of the local node. Otherwise the
	// reporter follows the listener's traffic direction.
	Gateway                   bool
	DisableHostHeaderFallback bool
	// TCPReportInterval is tcp_reporting_duration (default 5 s): how often a TCP
	// connection's byte counters are brought up to date while it lasts.
	TCPReportInterval time.Duration
	drop              map[string]bool
	remove            map[string]map[string]bool // metric -> tag -> removed
	// exprs and dims are the metrics' dimensions (dimensions.go).
	exprs exprSet
	dims  map[string]*dimensions
	// sets caches the metrics of each distinct request description, so a request
	// resolves its four metrics with one map lookup instead of building 25 tags and four
	// names; at most maxCachedSets entries. A plain map under a read lock: a sync.Map
	// boxed the ~200-byte key into an interface, one allocation per request.
	setsMu sync.RWMutex
	sets   map[httpKey]*httpSet
}

const maxCachedSets = 4096

// httpKey is everything a request's tags are computed from. The peer and the cluster
// metadata are identified by pointer: a peer comes from the peer filter's cache (one
// Workload per distinct header), a cluster update brings new metadata.
type httpKey struct {
	store                                             *stats.Store
	inbound, grpc                                     bool
	code                                              int
	host, cluster, route, peerSAN, localSAN, endpoint string
	peer, upstream                                    *peer.Workload
	flags, grpcStatus                                 string
	meta                                              *structpb.Struct
}

// httpSet is the resolved metrics of one httpKey; nil members are dropped metrics.
type httpSet struct {
	total            *stats.Stat
	dur, reqB, respB *stats.Histogram
}

// Compile compiles a stats.PluginConfig (directly or in a TypedStruct).
func Compile(a *anypb.Any) (*Config, error) {
	a, err := peer.ResolveTypedStruct(a)
	if err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	var pc statsapi.PluginConfig
	if err := a.UnmarshalTo(&pc); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := allow.Check(&pc); err != nil {
		return nil, fmt.Errorf("typed_config.%w", err)
	}
	c := &Config{DisableHostHeaderFallback: pc.GetDisableHostHeaderFallback(), TCPReportInterval: defaultTCPReportTime,
		drop: map[string]bool{}, remove: map[string]map[string]bool{}, dims: map[string]*dimensions{}}
	if d := pc.GetTcpReportingDuration(); d != nil {
		c.TCPReportInterval = d.AsDuration()
	}
	switch pc.GetReporter() {
	case statsapi.Reporter_UNSPECIFIED:
	case statsapi.Reporter_SERVER_GATEWAY:
		c.Gateway = true
	default:
		return nil, fmt.Errorf("typed_config.reporter: unknown reporter %s", pc.GetReporter())
	}
	for i, m := range pc.GetMetrics() {
		names := []string{}
		if m.GetName() == "" {
			for _, n := range shortNames {
				names = append(names, n)
			}
		} else if n, ok := shortNames[m.GetName()]; ok {
			names = append(names, n)
		} else {
			return nil, fmt.Errorf("typed_config.metrics[%d].name: %q is not a standard metric (custom metrics need CEL, not supported by meshlab proxy)", i, m.GetName())
		}
		if m.GetDrop() {
			for _, n := range names {
				c.drop[n] = true
			}
			continue
		}
		for _, n := range names {
			for _, t := range m.GetTagsToRemove() {
				if !standardTags[t] {
					continue // istio-proxy logs "Tag is not standard" and goes on
				}
				if c.remove[n] == nil {
					c.remove[n] = map[string]bool{}
				}
				c.remove[n][t] = true
				if d := c.dims[n]; d != nil {
					delete(d.override, t) // the later instruction wins, as in istio-proxy's one map
				}
			}
		}
		for t := range m.GetDimensions() {
			for _, n := range names {
				delete(c.remove[n], t)
			}
		}
		c.addDimensions(names, m.GetDimensions())
	}
	return c, nil
}

// filterTags applies tags_to_remove of metric.
func (c *Config) filterTags(metric string, tags []stats.Tag) []stats.Tag {
	rm := c.remove[metric]
	if len(rm) == 0 {
		return tags
	}
	out := make([]stats.Tag, 0, len(tags))
	for _, t := range tags {
		if !rm[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

func (c *Config) counter(st *stats.Store, metric string, tags []stats.Tag, vals []string) *stats.Stat {
	if c.drop[metric] {
		return nil
	}
	return st.TaggedCounter(stats.CustomNamespace+"."+metric, c.applyDimensions(metric, c.filterTags(metric, tags), vals))
}

func (c *Config) histogram(st *stats.Store, metric string, tags []stats.Tag, vals []string) *stats.Histogram {
	if c.drop[metric] {
		return nil
	}
	return st.TaggedHistogram(stats.CustomNamespace+"."+metric, c.applyDimensions(metric, c.filterTags(metric, tags), vals))
}

// RecordBuild sets istio_build{component="proxy",tag=<ISTIO_VERSION>} to 1, as the
// filter does when its config is created.
func RecordBuild(st *stats.Store, node *structpb.Struct) {
	v := node.GetFields()["ISTIO_VERSION"].GetStringValue()
	if v == "" {
		v = "unknown"
	}
	st.TaggedGauge(stats.CustomNamespace+"."+Build, []stats.Tag{{Name: "component", Value: "proxy"}, {Name: "tag", Value: v}}).Set(1)
}

// Side is what a report knows of the connection and the peer.
type Side struct {
	Inbound bool // the listener's traffic_direction: INBOUND reports as destination
	// Peer is the peer's metadata (downstream peer inbound and in a waypoint, upstream
	// peer outbound); nil when none arrived. Endpoint is the client side's fallback: the
	// upstream host's istio "workload" metadata.
	Peer     *peer.Workload
	Endpoint string
	// Upstream is a waypoint's upstream peer (the destination workload), nil when none
	// was discovered; only the Gateway reporter reads it.
	Upstream *peer.Workload
	// PeerKey identifies Peer for the metrics cache: the exchanged metadata as
	// received; a Peer without one is not cached.
	PeerKey string
	// PeerSAN and LocalSAN are the first URI SANs of the peer's and the local
	// certificate on the connection (downstream inbound, upstream outbound); "" for
	// plaintext. Inbound, istio-proxy takes them from the filter state objects
	// io.istio.peer_principal and io.istio.local_principal when either is set (a
	// waypoint's, from the HBONE connection), and from the connection otherwise.
	PeerSAN, LocalSAN string
	// Host is the request's authority (HTTP), used unless DisableHostHeaderFallback.
	Host string
	// Cluster and ClusterIstio are the upstream cluster's name and its "istio" filter
	// metadata; RouteName the route's name.
	Cluster      string
	ClusterIstio *structpb.Struct
	RouteName    string
}

// peerTags computes the reporter and the source_* and destination_* tags, in
// istio-proxy's order.
func (c *Config) peerTags(s *Side) []stats.Tag {
	local := peer.Local().Workload
	tags := make([]stats.Tag, 0, 25)
	add := func(n, v string) { tags = append(tags, stats.Tag{Name: n, Value: v}) }
	or := func(vs ...string) string {
		for _, v := range vs[:len(vs)-1] {
			if v != "" {
				return v
			}
		}
		return vs[len(vs)-1]
	}
	p := s.Peer
	if p == nil && !s.Inbound && !c.Gateway {
		if w, ok := peer.FromEndpoint(s.Endpoint); ok {
			p = w
		}
	}
	if p == nil {
		p = &peer.Workload{}
	}
	host, hostName, hostNS := "", "", ""
	if !c.DisableHostHeaderFallback && s.Host != "" {
		host, hostName = s.Host, s.Host
	}
	switch s.RouteName {
	case "block_all":
		hostName = "BlackHoleCluster"
	case "allow_any":
		hostName = "PassthroughCluster"
	default:
		switch s.Cluster {
		case "BlackHoleCluster", "PassthroughCluster", "InboundPassthroughCluster", "InboundPassthroughClusterIpv4", "InboundPassthroughClusterIpv6":
			hostName = s.Cluster
		default:
			if svcs := s.ClusterIstio.GetFields()["services"].GetListValue().GetValues(); len(svcs) > 0 {
				f := svcs[0].GetStructValue().GetFields()
				if h, ok := f["host"]; ok {
					host = h.GetStringValue()
				}
				hostNS = f["namespace"].GetStringValue()
				if n, ok := f["name"]; ok {
					hostName = n.GetStringValue()
				} else {
					hostName = host
					for i := 0; i < len(host); i++ {
						if host[i] == '.' {
							hostName = host[:i]
							break
						}
					}
				}
			}
		}
	}
	peerNS := peer.SANNamespace(s.PeerSAN)
	if peerNS == "" {
		peerNS = p.Namespace
	}
	if s.Inbound || c.Gateway {
		if c.Gateway {
			add("reporter", "waypoint")
		} else {
			add("reporter", "destination")
		}
		add("source_workload", or(p.WorkloadName, "unknown"))
		add("source_canonical_service", or(p.CanonicalName, "unknown"))
		add("source_canonical_revision", or(p.CanonicalRevision, "latest"))
		add("source_workload_namespace", or(peerNS, "unknown"))
		add("source_principal", or(s.PeerSAN, "unknown"))
		add("source_app", or(p.App, "unknown"))
		add("source_version", or(p.Version, "unknown"))
		add("source_cluster", or(p.Cluster, "unknown"))
		if c.Gateway {
			return c.waypointDestination(tags, s, host, hostName, hostNS)
		}
		add("destination_workload", local.WorkloadName)
		add("destination_workload_namespace", local.Namespace)
		add("destination_principal", or(s.LocalSAN, "unknown"))
		add("destination_app", local.App)
		add("destination_version", local.Version)
		add("destination_service", or(host, local.CanonicalName))
		add("destination_canonical_service", local.CanonicalName)
		add("destination_canonical_revision", local.CanonicalRevision)
		add("destination_service_name", or(hostName, local.CanonicalName))
		add("destination_service_namespace", local.Namespace)
		add("destination_cluster", local.Cluster)
		return tags
	}
	add("reporter", "source")
	add("source_workload", local.WorkloadName)
	add("source_canonical_service", local.CanonicalName)
	add("source_canonical_revision", local.CanonicalRevision)
	add("source_workload_namespace", local.Namespace)
	add("source_principal", or(s.LocalSAN, "unknown"))
	add("source_app", local.App)
	add("source_version", local.Version)
	add("source_cluster", local.Cluster)
	add("destination_workload", or(p.WorkloadName, "unknown"))
	add("destination_workload_namespace", or(peerNS, "unknown"))
	add("destination_principal", or(s.PeerSAN, "unknown"))
	add("destination_app", or(p.App, "unknown"))
	add("destination_version", or(p.Version, "unknown"))
	add("destination_service", or(host, "unknown"))
	add("destination_canonical_service", or(p.CanonicalName, "unknown"))
	add("destination_canonical_revision", or(p.CanonicalRevision, "latest"))
	add("destination_service_name", or(hostName, "unknown"))
	add("destination_service_namespace", or(hostNS, peerNS, "unknown"))
	add("destination_cluster", or(p.Cluster, "unknown"))
	return tags
}

// waypointDestination appends a waypoint's destination tags: the upstream peer's (the
// destination workload as metadata discovery knows it, its identity the principal),
// else the upstream endpoint's istio workload metadata (a TCP chain's, where no
// upstream discovery runs), the service from the cluster's metadata, "unknown" for what
// is not known.
func (c *Config) waypointDestination(tags []stats.Tag, s *Side, host, hostName, hostNS string) []stats.Tag {
	up := s.Upstream
	if up == nil {
		if w, ok := peer.FromEndpoint(s.Endpoint); ok {
			up = w
		} else {
			up = &peer.Workload{}
		}
	}
	unknown := func(v string) string {
		if v == "" {
			return "unknown"
		}
		return v
	}
	return append(tags,
		stats.Tag{Name: "destination_workload", Value: unknown(up.WorkloadName)},
		stats.Tag{Name: "destination_workload_namespace", Value: unknown(up.Namespace)},
		stats.Tag{Name: "destination_principal", Value: unknown(up.Identity)},
		stats.Tag{Name: "destination_app", Value: unknown(up.App)},
		stats.Tag{Name: "destination_version", Value: unknown(up.Version)},
		stats.Tag{Name: "destination_service", Value: unknown(host)},
		stats.Tag{Name: "destination_canonical_service", Value: unknown(up.CanonicalName)},
		stats.Tag{Name: "destination_canonical_revision", Value: unknown(up.CanonicalRevision)},
		stats.Tag{Name: "destination_service_name", Value: unknown(hostName)},
		stats.Tag{Name: "destination_service_namespace", Value: unknown(hostNS)},
		stats.Tag{Name: "destination_cluster", Value: unknown(up.Cluster)})
}

// security is connection_security_policy: the server side and a waypoint know
// (mutual_tls when both ends presented a certificate with a URI SAN, else none); the
// client side reports unknown, as istio-proxy.
func (c *Config) security(s *Side) string {
	if !s.Inbound && !c.Gateway {
		return "unknown"
	}
	if s.PeerSAN != "" && s.LocalSAN != "" {
		return "mutual_tls"
	}
	return "none"
}

// Request is one finished HTTP request.
type Request struct {
	GRPC bool
	Code int
	// GRPCStatus is the response's grpc-status ("" when none or not gRPC).
	GRPCStatus string
	Flags      string // Envoy's short response flags, "-" for none
	Duration   time.Duration
	// RequestBytes and ResponseBytes are the downstream wire bytes received and sent.
	RequestBytes, ResponseBytes int64
	// Attrs are the request's attributes, which the metrics' dimensions read; set only
	// when the config HasDimensions.
	Attrs *Attributes
}

// RecordHTTP counts one finished request, as istio-proxy's filter does from its access
// log handler.
func (c *Config) RecordHTTP(st *stats.Store, s *Side, r *Request) {
	// A request's dimensions depend on more than the key: not cached.
	cacheable := (s.Peer == nil || s.PeerKey != "") && !c.HasDimensions()
	k := httpKey{store: st, inbound: s.Inbound, grpc: r.GRPC, code: r.Code, host: s.Host, cluster: s.Cluster,
		route: s.RouteName, peerSAN: s.PeerSAN, localSAN: s.LocalSAN, endpoint: s.Endpoint, peer: s.Peer, upstream: s.Upstream,
		flags: r.Flags, grpcStatus: r.GRPCStatus, meta: s.ClusterIstio}
	if cacheable {
		c.setsMu.RLock()
		set, ok := c.sets[k]
		c.setsMu.RUnlock()
		if ok {
			set.record(r)
			return
		}
	}
	set := c.resolveHTTP(st, s, r)
	if cacheable {
		c.setsMu.Lock()
		if c.sets == nil {
			c.sets = map[httpKey]*httpSet{}
		}
		if len(c.sets) < maxCachedSets {
			c.sets[k] = set
		}
		c.setsMu.Unlock()
	}
	set.record(r)
}

func (set *httpSet) record(r *Request) {
	if set.total != nil {
		set.total.Inc()
	}
	if set.dur != nil {
		set.dur.Record(uint64(r.Duration.Milliseconds()))
	}
	if set.reqB != nil {
		set.reqB.Record(uint64(max(r.RequestBytes, 0)))
	}
	if set.respB != nil {
		set.respB.Record(uint64(max(r.ResponseBytes, 0)))
	}
}

// resolveHTTP computes a request's tags, in istio-proxy's order, and its metrics.
func (c *Config) resolveHTTP(st *stats.Store, s *Side, r *Request) *httpSet {
	tags := c.peerTags(s)
	proto := "http"
	if r.GRPC {
		proto = "grpc"
	}
	tags = append(tags,
		stats.Tag{Name: "request_protocol", Value: proto},
		stats.Tag{Name: "response_code", Value: fmt.Sprint(r.Code)},
		stats.Tag{Name: "grpc_response_status", Value: r.GRPCStatus},
		stats.Tag{Name: "response_flags", Value: r.Flags},
		stats.Tag{Name: "connection_security_policy", Value: c.security(s)})
	var vals []string
	if c.HasDimensions() {
		vals = c.evaluate(r)
	}
	return &httpSet{total: c.counter(st, RequestsTotal, tags, vals), dur: c.histogram(st, RequestDuration, tags, vals),
		reqB: c.histogram(st, RequestBytes, tags, vals), respB: c.histogram(st, ResponseBytes, tags, vals)}
}
