package stats

import "strings"

// Envoy's default tag names, as rendered (sanitized) in /stats/prometheus labels.
const (
	TagClusterName   = "envoy.cluster_name"
	TagListenerAddr  = "envoy.listener_address"
	TagHTTPPrefix    = "envoy.http_conn_manager_prefix"
	TagTCPPrefix     = "envoy.tcp_prefix"
	TagResponseCode  = "envoy.response_code"
	TagResponseClass = "envoy.response_code_class"
)

// Cluster returns the scope "cluster.<name>." tagged with the cluster name.
func (s *Store) Cluster(name string) Scope {
	return s.Root().Scope("cluster", "").Scope(name, TagClusterName)
}

// Listener returns the scope "listener.<addr>." for a listener address such as
// "0.0.0.0:15001", written with ':' replaced by '_' as Envoy does.
func (s *Store) Listener(addr string) Scope {
	return s.Root().Scope("listener", "").Scope(ListenerStatName(addr), TagListenerAddr)
}

// HTTP returns the scope "http.<stat_prefix>." of an HTTP connection manager.
func (s *Store) HTTP(statPrefix string) Scope {
	return s.Root().Scope("http", "").Scope(statPrefix, TagHTTPPrefix)
}

// TCP returns the scope "tcp.<stat_prefix>." of a tcp_proxy filter.
func (s *Store) TCP(statPrefix string) Scope {
	return s.Root().Scope("tcp", "").Scope(statPrefix, TagTCPPrefix)
}

// Named returns an untagged scope for a dotted prefix such as "cluster_manager.cds".
func (s *Store) Named(prefix string) Scope {
	sc := s.Root()
	for _, seg := range strings.Split(prefix, ".") {
		sc = sc.Scope(seg, "")
	}
	return sc
}

// ListenerStatName returns Envoy's stat name for a listener address: "0.0.0.0:15001"
// becomes "0.0.0.0_15001".
func ListenerStatName(addr string) string {
	return strings.ReplaceAll(addr, ":", "_")
}

// CodeClass returns "2xx" for 200 and so on.
func CodeClass(code int) string {
	return string(rune('0'+code/100)) + "xx"
}

// NeverImport reports whether a hot restart child must not import the parent's value of
// the gauge name, as Envoy's gauges declared NeverImport: values that describe one
// process (its epoch, state, uptime, configured listeners and clusters, control plane
// connection, cluster membership). Every other gauge accumulates across epochs.
func NeverImport(name string) bool {
	switch name {
	case "server.hot_restart_generation", "server.parent_connections", "server.total_connections":
		return false
	}
	for _, p := range []string{"server.", "listener_manager.", "cluster_manager.", "control_plane."} {
		if strings.HasPrefix(name, p) {
			return !strings.HasPrefix(name, "server.memory_")
		}
	}
	return strings.HasPrefix(name, "cluster.") && strings.Contains(name, ".membership_")
}
