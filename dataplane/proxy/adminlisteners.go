package proxy

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// Listeners returns Envoy's /listeners message: every active listener with its local
// address, the bound one when it asked for port 0.
func (b adminBackend) Listeners() *adminv3.Listeners {
	out := &adminv3.Listeners{}
	for _, cfg := range b.s.listeners.Configs() {
		addr := cfg.Addr
		if bound, ok := b.s.listeners.Addr(cfg.Name); ok {
			addr = bound
		}
		local := &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: addr.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(addr.Port())},
		}}}
		if cfg.Internal {
			local = internalAddress(cfg.Name, "")
		}
		out.ListenerStatuses = append(out.ListenerStatuses, &adminv3.ListenerStatus{Name: cfg.Name, LocalAddress: local})
	}
	return out
}

// Clusters returns Envoy's /clusters?format=json message (envoy.admin.v3.Clusters).
func (b adminBackend) Clusters() *adminv3.Clusters {
	out := &adminv3.Clusters{}
	for _, c := range b.s.clusters.All() {
		n := c.Name()
		th := c.Breakers()
		st := &adminv3.ClusterStatus{
			Name:              n,
			ObservabilityName: n,
			AddedViaApi:       !b.s.clusters.IsStatic(n),
			CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
				thresholds(corev3.RoutingPriority_DEFAULT, th),
				thresholds(corev3.RoutingPriority_HIGH, cluster.DefaultThresholds),
			}},
		}
		if c.Config().Type == cluster.TypeEDS {
			st.EdsServiceName = c.Config().ServiceName
		}
		for _, h := range c.Hosts() {
			st.HostStatuses = append(st.HostStatuses, hostStatus(c, h))
		}
		out.ClusterStatuses = append(out.ClusterStatuses, st)
	}
	return out
}

func hostStatus(c *cluster.Cluster, h cluster.Host) *adminv3.HostStatus {
	addr := &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: h.Pipe}}}
	if h.Internal.Listener != "" {
		addr = internalAddress(h.Internal.Listener, h.Internal.EndpointID)
	} else if h.Pipe == "" {
		addr = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: h.Addr.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(h.Addr.Port())},
		}}}
	}
	counters := c.HostCounters(h)
	counters["rq_active"], counters["rq_error"], counters["rq_success"], counters["rq_timeout"] = 0, 0, 0, 0
	hs := &adminv3.HostStatus{Address: addr, Weight: 1, HealthStatus: &adminv3.HostHealthStatus{EdsHealthStatus: corev3.HealthStatus_HEALTHY}}
	// Envoy lists the host stats in this order, gauges typed GAUGE.
	for _, name := range []string{"cx_connect_fail", "cx_total", "rq_error", "rq_success", "rq_timeout", "rq_total", "cx_active", "rq_active"} {
		m := &adminv3.SimpleMetric{Name: name, Value: uint64(max(counters[name], 0))}
		if name == "cx_active" || name == "rq_active" {
			m.Type = adminv3.SimpleMetric_GAUGE
		}
		hs.Stats = append(hs.Stats, m)
	}
	if !h.Healthy {
		hs.HealthStatus.EdsHealthStatus = corev3.HealthStatus_UNHEALTHY
	}
	if c.HealthFlags(h) != "healthy" && h.Healthy {
		hs.HealthStatus.FailedOutlierCheck = true
	}
	return hs
}

func thresholds(prio corev3.RoutingPriority, th cluster.Thresholds) *clusterv3.CircuitBreakers_Thresholds {
	u32 := func(v uint64) *wrapperspb.UInt32Value { return wrapperspb.UInt32(uint32(min(v, 1<<32-1))) }
	return &clusterv3.CircuitBreakers_Thresholds{
		Priority:           prio,
		MaxConnections:     u32(th.MaxConnections),
		MaxPendingRequests: u32(th.MaxPendingRequests),
		MaxRequests:        u32(th.MaxRequests),
		MaxRetries:         u32(th.MaxRetries),
	}
}

// internalAddress is an envoy_internal_address.
func internalAddress(listener, endpointID string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
		AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listener},
		EndpointId:           endpointID,
	}}}
}
