package xds

import (
	"fmt"
	"math"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// HTTPProtocolOptionsKey is the typed_extension_protocol_options key of a cluster's
// upstream HTTP options.
const HTTPProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// portTrafficPolicy returns tp as it applies to port: the port's portLevelSettings entry
// when there is one (whose unset parts fall back to defaults, not to tp's, as Istio
// documents), else tp without its port-level settings.
func portTrafficPolicy(tp *networking.TrafficPolicy, port uint16) *networking.TrafficPolicy {
	if tp == nil {
		return nil
	}
	for _, pl := range tp.GetPortLevelSettings() {
		if pl.GetPort().GetNumber() == uint32(port) {
			return &networking.TrafficPolicy{
				ConnectionPool: pl.GetConnectionPool(), OutlierDetection: pl.GetOutlierDetection(), LoadBalancer: pl.GetLoadBalancer(),
				Tls: pl.GetTls(),
			}
		}
	}
	return &networking.TrafficPolicy{
		ConnectionPool: tp.GetConnectionPool(), OutlierDetection: tp.GetOutlierDetection(), LoadBalancer: tp.GetLoadBalancer(),
		Tls: tp.GetTls(),
	}
}

// mergeTrafficPolicy returns the policy of a subset cluster on port, as Istio's
// MergeTrafficPolicy: the rule's policy for the port, each part (tls included) replaced by the subset's
// when the subset sets it, and all parts replaced by the subset's port-level settings for
// the port when it has them.
func mergeTrafficPolicy(rule, subset *networking.TrafficPolicy, port uint16) *networking.TrafficPolicy {
	merged := portTrafficPolicy(rule, port)
	if subset == nil {
		return merged
	}
	if merged == nil {
		merged = &networking.TrafficPolicy{}
	}
	if subset.GetConnectionPool() != nil {
		merged.ConnectionPool = subset.GetConnectionPool()
	}
	if subset.GetOutlierDetection() != nil {
		merged.OutlierDetection = subset.GetOutlierDetection()
	}
	if subset.GetLoadBalancer() != nil {
		merged.LoadBalancer = subset.GetLoadBalancer()
	}
	if subset.GetTls() != nil {
		merged.Tls = subset.GetTls()
	}
	for _, pl := range subset.GetPortLevelSettings() {
		if pl.GetPort().GetNumber() == uint32(port) {
			merged = &networking.TrafficPolicy{
				ConnectionPool: pl.GetConnectionPool(), OutlierDetection: pl.GetOutlierDetection(), LoadBalancer: pl.GetLoadBalancer(),
				Tls: pl.GetTls(),
			}
			break
		}
	}
	return merged
}

// applyTrafficPolicy sets what a DestinationRule's policy decides on an outbound cluster,
// as Istio's applyTrafficPolicy: the load balancer, circuit breaker thresholds (Istio's
// defaults for what the policy leaves unset), upstream HTTP options, outlier detection.
func applyTrafficPolicy(c *cluster.Cluster, tp *networking.TrafficPolicy, protocol model.Protocol) error {
	switch tp.GetLoadBalancer().GetSimple() {
	case networking.LoadBalancerSettings_ROUND_ROBIN:
		c.LbPolicy = cluster.Cluster_ROUND_ROBIN
	case networking.LoadBalancerSettings_RANDOM:
		c.LbPolicy = cluster.Cluster_RANDOM
	default:
		// LEAST_REQUEST (and the deprecated LEAST_CONN), or unset: Istio's default.
		c.LbPolicy = cluster.Cluster_LEAST_REQUEST
	}
	if c.GetType() != cluster.Cluster_EDS && c.GetType() != cluster.Cluster_STRICT_DNS {
		c.LbPolicy = cluster.Cluster_CLUSTER_PROVIDED
	}

	cp := tp.GetConnectionPool()
	c.CircuitBreakers = defaultCircuitBreakers()
	th := c.CircuitBreakers.Thresholds[0]
	if v := cp.GetHttp().GetHttp2MaxRequests(); v > 0 {
		th.MaxRequests = wrapperspb.UInt32(uint32(v))
	}
	if v := cp.GetHttp().GetHttp1MaxPendingRequests(); v > 0 {
		th.MaxPendingRequests = wrapperspb.UInt32(uint32(v))
	}
	if v := cp.GetTcp().GetMaxConnections(); v > 0 {
		th.MaxConnections = wrapperspb.UInt32(uint32(v))
	}

	if v := cp.GetHttp().GetMaxRequestsPerConnection(); v > 0 && protocol.IsHTTPOrSniffed() {
		opts, err := httpProtocolOptions(uint32(v), protocol)
		if err != nil {
			return err
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: opts}
	}

	if od := tp.GetOutlierDetection(); od != nil {
		c.OutlierDetection = outlierDetection(od)
		// Istio disables the panic threshold (min health percent 0): a lab service has
		// few pods, and Envoy's 50% would send traffic to ejected ones.
		c.CommonLbConfig = &cluster.Cluster_CommonLbConfig{HealthyPanicThreshold: &xdstype.Percent{Value: 0}}
	}
	return nil
}

// httpProtocolOptions limits requests per upstream connection. Envoy requires the
// upstream protocol to be chosen explicitly: HTTP/2 for HTTP2 and gRPC ports, else HTTP/1.1.
func httpProtocolOptions(maxPerConn uint32, protocol model.Protocol) (*anypb.Any, error) {
	explicit := &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
		ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &core.Http1ProtocolOptions{}},
	}
	if protocol == model.ProtocolHTTP2 || protocol == model.ProtocolGRPC {
		explicit.ProtocolConfig = &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &core.Http2ProtocolOptions{}}
	}
	a, err := typed(&upstreamhttp.HttpProtocolOptions{
		CommonHttpProtocolOptions: &core.HttpProtocolOptions{MaxRequestsPerConnection: wrapperspb.UInt32(maxPerConn)},
		UpstreamProtocolOptions:   &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: explicit},
	})
	if err != nil {
		return nil, fmt.Errorf("build http protocol options: %w", err)
	}
	return a, nil
}

// outlierDetection translates as Istio's applyOutlierDetection: success-rate ejection
// off, consecutive 5xx enforced at 100% when set, and interval, base ejection time and
// max ejection percent copied. Consecutive gateway failures are left to Envoy's default
// (5, enforced at 0%), as Istio leaves them when consecutiveGatewayErrors is unset.
func outlierDetection(od *networking.OutlierDetection) *cluster.OutlierDetection {
	out := &cluster.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}
	if e := od.GetConsecutive_5XxErrors(); e != nil {
		out.Consecutive_5Xx = wrapperspb.UInt32(e.GetValue())
		enforcing := uint32(0)
		if e.GetValue() > 0 {
			enforcing = 100
		}
		out.EnforcingConsecutive_5Xx = wrapperspb.UInt32(enforcing)
	}
	out.Interval = od.GetInterval()
	out.BaseEjectionTime = od.GetBaseEjectionTime()
	if v := od.GetMaxEjectionPercent(); v > 0 {
		out.MaxEjectionPercent = wrapperspb.UInt32(uint32(v))
	}
	return out
}

// defaultCircuitBreakers returns Istio's thresholds for an outbound cluster whose policy
// sets none: no limit at all, where Envoy's own defaults (1024 connections, 3 concurrent
// retries) would make a VirtualService's retries overflow under modest concurrency.
func defaultCircuitBreakers() *cluster.CircuitBreakers {
	return &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
		MaxConnections:     wrapperspb.UInt32(math.MaxUint32),
		MaxPendingRequests: wrapperspb.UInt32(math.MaxUint32),
		MaxRequests:        wrapperspb.UInt32(math.MaxUint32),
		MaxRetries:         wrapperspb.UInt32(math.MaxUint32),
	}}}
}
