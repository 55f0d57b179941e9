package xds

import (
	"fmt"
	"math"
	"slices"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// dnsRefreshRate is how often a STRICT_DNS cluster re-resolves (Istio's mesh default),
// and dnsJitter the random extra istiod adds to each refresh (PILOT_DNS_JITTER_DURATION).
var (
	dnsRefreshRate = durationpb.New(60e9)
	dnsJitter      = durationpb.New(100e6)
)

// clusters returns the proxy's clusters: for each service port in the model an outbound
// cluster plus one per subset of its DestinationRule, an inbound cluster per app port of
// the pod, and the three fixed clusters.
func clusters(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	var out []types.Resource
	for _, sp := range outboundPorts(m) {
		for _, oc := range outboundClustersOf(m, pod, sp) {
			c, err := outboundCluster(m, sp, oc)
			if err != nil {
				return nil, fmt.Errorf("build cluster %s: %w", oc.name, err)
			}
			out = append(out, c)
		}
	}
	local, err := localClusters(m, pod)
	if err != nil {
		return nil, err
	}
	return append(out, local...), nil
}

// localClusters returns the clusters that depend on the pod itself, not on the mesh's
// services as seen from its namespace: an inbound cluster per app port, then the three
// fixed clusters.
func localClusters(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	out, err := connectOriginateCluster(m) // hbone_send.go
	if err != nil {
		return nil, err
	}
	if pod.Router {
		return append(out, blackHoleCluster()), nil // a gateway has no inbound side nor passthrough
	}
	for _, ip := range inboundPorts(m, pod) {
		c := originalDstCluster(InboundClusterName(ip.target), true)
		c.Metadata = inboundServicesMetadata(m, pod, ip.target)
		// As Istio's buildInboundCluster: an original destination cluster whose hosts
		// are never cleaned up, with the default (unlimited) circuit breakers.
		c.CommonLbConfig = &cluster.Cluster_CommonLbConfig{}
		c.CleanupInterval = &durationpb.Duration{Seconds: maxSecondsValue}
		c.CircuitBreakers = defaultCircuitBreakers()
		if ip.endpoint != nil {
			sidecarIngressEndpoint(c, pod, *ip.endpoint) // sidecar.go
		}
		if ip.sidecar != nil && len(c.GetMetadata().GetFilterMetadata()["istio"].GetFields()["services"].GetListValue().GetValues()) == 0 {
			// No Service delivers to the Sidecar's port: istiod's findOrCreateService
			// makes one named after the Sidecar for the cluster's telemetry.
			c.Metadata = servicesMetadata([]*structpb.Value{structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"host":      structpb.NewStringValue(ip.host),
				"name":      structpb.NewStringValue(ip.sidecar.Name),
				"namespace": structpb.NewStringValue(ip.sidecar.Namespace),
			}})})
		}
		if err := applyUpstreamProtocol(c, ip.protocol); err != nil {
			return nil, fmt.Errorf("build cluster %s: %w", c.Name, err)
		}
		out = append(out, c)
	}
	for _, inbound := range []bool{false, true} {
		c, err := passthroughCluster(inbound)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return append(out, blackHoleCluster()), nil
}

// maxSecondsValue is the longest duration Envoy takes, in seconds (about 292 years):
// Istio's "never" for an inbound cluster's cleanup interval.
const maxSecondsValue = (math.MaxInt64 - 999999999) / int64(time.Second)

// passthroughCluster is PassthroughCluster, or InboundPassthroughCluster when inbound, as
// Istio's buildDefaultPassthroughCluster: original destination, HTTP upstream in the
// protocol the client spoke (idle connections closed after 5 minutes), and the default
// circuit breakers.
func passthroughCluster(inbound bool) (*cluster.Cluster, error) {
	name := PassthroughCluster
	if inbound {
		name = InboundPassthroughCluster
	}
	c := originalDstCluster(name, inbound)
	opts, err := typed(&upstreamhttp.HttpProtocolOptions{
		CommonHttpProtocolOptions: &core.HttpProtocolOptions{IdleTimeout: durationpb.New(5 * time.Minute)},
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions:  &core.Http1ProtocolOptions{},
			Http2ProtocolOptions: &core.Http2ProtocolOptions{},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("build cluster %s: %w", name, err)
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: opts}
	c.CircuitBreakers = defaultCircuitBreakers()
	if !inbound {
		c.Filters = metadataExchangeClusterFilters() // telemetry.go
	}
	return c, nil
}

// outboundClusterSpec is one outbound cluster of a service port: the default one or a
// DestinationRule subset.
type outboundClusterSpec struct {
	name   string
	subset string            // "" for the default cluster
	labels map[string]string // the subset's labels; nil selects every endpoint
	dr     *model.IstioConfig[*networking.DestinationRule]
	policy *networking.TrafficPolicy // merged for the port and subset; nil without a rule
	// proxyNS is the namespace of the proxy the cluster is for (where a rule's
	// credentialName is read).
	proxyNS string
}

// outboundClustersOf returns the default cluster of sp and, when a DestinationRule
// applies to its host, one cluster per subset, in the rule's order.
func outboundClustersOf(m *model.Model, pod *model.Pod, sp servicePort) []outboundClusterSpec {
	dr := destinationRuleFor(m, sp.host, pod.Namespace, sp.svc.Namespace)
	def := outboundClusterSpec{name: sp.clusterName(), dr: dr, proxyNS: pod.Namespace}
	if dr == nil {
		return []outboundClusterSpec{def}
	}
	def.policy = portTrafficPolicy(dr.Spec.GetTrafficPolicy(), sp.port.Port)
	out := []outboundClusterSpec{def}
	for _, s := range dr.Spec.GetSubsets() {
		out = append(out, outboundClusterSpec{
			name:    OutboundClusterName(sp.port.Port, s.GetName(), sp.host),
			subset:  s.GetName(),
			labels:  s.GetLabels(),
			dr:      dr,
			policy:  mergeTrafficPolicy(dr.Spec.GetTrafficPolicy(), s.GetTrafficPolicy(), sp.port.Port),
			proxyNS: pod.Namespace,
		})
	}
	return out
}

// outboundCluster balances over the endpoints of one outbound cluster of sp. They arrive
// over EDS under the cluster's own name, except for a ServiceEntry with DNS resolution,
// whose STRICT_DNS cluster carries the names the proxy resolves.
func outboundCluster(m *model.Model, sp servicePort, oc outboundClusterSpec) (*cluster.Cluster, error) {
	c := &cluster.Cluster{
		Name:           oc.name,
		ConnectTimeout: connectTimeout,
		LbPolicy:       cluster.Cluster_LEAST_REQUEST, // Istio's default (defaultLBAlgorithm)
		// Istio disables the panic threshold of a service whose unhealthy endpoints it
		// sends (the default): traffic never goes to endpoints known to be unhealthy.
		CommonLbConfig: &cluster.Cluster_CommonLbConfig{HealthyPanicThreshold: &xdstype.Percent{}},
		Metadata:       servicesMetadata([]*structpb.Value{serviceMetadata(sp)}),
		Filters:        metadataExchangeClusterFilters(), // telemetry.go
	}
	switch {
	case sp.passthroughResolved():
		// resolution NONE: to the address the client dialled, as istiod's ORIGINAL_DST.
		c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST}
		c.LbPolicy = cluster.Cluster_CLUSTER_PROVIDED
	case sp.dnsResolved():
		c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_STRICT_DNS}
		c.DnsLookupFamily = cluster.Cluster_V4_ONLY
		c.DnsRefreshRate = dnsRefreshRate                                                           //nolint:staticcheck // deprecated, and istiod still sets it on DNS clusters.
		c.RespectDnsTtl = true                                                                      //nolint:staticcheck // as above.
		c.DnsJitter = dnsJitter                                                                     //nolint:staticcheck // as above.
		cares, err := typed(&caresv3.CaresDnsResolverConfig{UdpMaxQueries: wrapperspb.UInt32(100)}) // PILOT_DNS_CARES_UDP_MAX_QUERIES
		if err != nil {
			return nil, err
		}
		c.TypedDnsResolverConfig = &core.TypedExtensionConfig{Name: "envoy.network.dns_resolver.cares", TypedConfig: cares}
		c.LoadAssignment = loadAssignment(m, oc.name, subsetInstances(sp.instances(m), oc.labels))
	default:
		c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_EDS}
		c.EdsClusterConfig = &cluster.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource(), ServiceName: oc.name}
	}
	if err := applyClusterTLS(c, m, sp, oc); err != nil {
		return nil, err
	}
	if oc.dr == nil {
		// Istio gives every outbound cluster its circuit-breaker defaults, rule or not.
		c.CircuitBreakers = defaultCircuitBreakers()
		return c, applyUpstreamProtocol(c, sp.port.Protocol)
	}
	// Istio records the rule as the origin of a cluster it shaped (istioctl's
	// DESTINATION RULE column), and the subset's name.
	istio := c.Metadata.FilterMetadata["istio"].Fields
	istio["config"] = structpb.NewStringValue(IstioConfigPath("destination-rule", oc.dr.Namespace, oc.dr.Name))
	if oc.subset != "" {
		istio["subset"] = structpb.NewStringValue(oc.subset)
	}
	if err := applyTrafficPolicy(c, oc.policy, sp.port.Protocol); err != nil {
		return nil, err
	}
	return c, applyUpstreamProtocol(c, sp.port.Protocol)
}

// subsetInstances returns the instances whose labels match selector, in order.
func subsetInstances(all []instance, selector map[string]string) []instance {
	if len(selector) == 0 {
		return all
	}
	var out []instance
	for _, in := range all {
		if labelsMatch(selector, in.labels) {
			out = append(out, in)
		}
	}
	return out
}

// originalDstCluster connects to the connection's original destination. Inbound ones
// bind to 127.0.0.6 so the capture rules do not redirect the delivery back to the proxy.
func originalDstCluster(name string, inbound bool) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
		ConnectTimeout:       connectTimeout,
		LbPolicy:             cluster.Cluster_CLUSTER_PROVIDED,
	}
	if inbound {
		c.UpstreamBindConfig = &core.BindConfig{SourceAddress: &core.SocketAddress{
			Protocol:      core.SocketAddress_TCP,
			Address:       InboundPassthroughSource.String(),
			PortSpecifier: &core.SocketAddress_PortValue{PortValue: 0},
		}}
	}
	return c
}

// blackHoleCluster has no endpoints, so whatever is sent to it fails.
func blackHoleCluster() *cluster.Cluster {
	return &cluster.Cluster{
		Name:                 BlackHoleCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		ConnectTimeout:       connectTimeout,
	}
}

// servicesMetadata is the "istio" filter metadata Istio gives the clusters of services
// (addTelemetryMetadata): the services the cluster serves, which its stats filter
// labels metrics with. A cluster shaped by a DestinationRule adds the rule's "config"
// path and its "subset"; without a rule there is no "config" (istioctl shows no
// DESTINATION RULE).
func servicesMetadata(services []*structpb.Value) *core.Metadata {
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": {Fields: map[string]*structpb.Value{
		"services": structpb.NewListValue(&structpb.ListValue{Values: services}),
	}}}}
}

// serviceMetadata is one entry of the "services" list: the service's host, its short
// name and namespace (Istio's buildServiceMetadata). A ServiceEntry host's name is the
// host itself, as Istio names the services it makes of ServiceEntries.
func serviceMetadata(sp servicePort) *structpb.Value {
	name, ns := sp.svc.Name, sp.svc.Namespace
	if sp.se != nil {
		name, ns = sp.host, sp.se.Namespace
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"host":      structpb.NewStringValue(sp.host),
		"name":      structpb.NewStringValue(name),
		"namespace": structpb.NewStringValue(ns),
	}})
}

// inboundServicesMetadata lists, for the inbound cluster of target port, the services
// selecting pod that deliver to that port, in model order, each host once.
func inboundServicesMetadata(m *model.Model, pod *model.Pod, target uint16) *core.Metadata {
	var services []*structpb.Value
	for _, s := range m.ServicesFor(pod) {
		if slices.ContainsFunc(s.Ports, func(p model.ServicePort) bool { return p.TargetPort == target }) {
			services = append(services, serviceMetadata(servicePort{svc: s, host: s.Hostname()}))
		}
	}
	return servicesMetadata(services)
}
