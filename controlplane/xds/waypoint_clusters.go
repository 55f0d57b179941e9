package xds

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	internalupstream "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// originalDstMetadata is the metadata namespace Envoy's original_dst listener filter
// reads an internal connection's destination from (key "local"), and the namespace the
// connect_originate cluster's metadata key lives in.
const originalDstMetadata = "envoy.filters.listener.original_dst"

// vipCluster is one inbound-vip cluster of a service port a waypoint serves: the port's
// own, or one per subset of the DestinationRule of the service's host, as istiod's
// buildWaypointInboundVIP makes them (inbound-vip|<port>|<http or tcp>[/<subset>]|<host>).
type vipCluster struct {
	p      waypointPort
	subset string            // the DestinationRule subset; "" for the port's own cluster
	labels map[string]string // the subset's labels; nil selects every pod of the service
	dr     *model.IstioConfig[*networking.DestinationRule]
	// policy is the rule's traffic policy for the port (merged with the subset's); nil
	// without a rule or when the rule sets none.
	policy *networking.TrafficPolicy
}

// kind is the cluster name's protocol part: "http" or "tcp", then "/<subset>".
func (v vipCluster) kind() string {
	if v.subset == "" {
		return v.p.protocol()
	}
	return v.p.protocol() + "/" + v.subset
}

func (v vipCluster) name() string {
	return InboundVIPClusterName(v.p.port.Port, v.kind(), v.p.svc.Hostname())
}

// waypointVIPClusters returns the inbound-vip clusters of ports: each port's own, then
// one per subset of the DestinationRule of its host, looked up as for the waypoint's
// namespace (its own namespace's rules first, then the service's).
func waypointVIPClusters(m *model.Model, w WaypointSpec, ports []waypointPort) []vipCluster {
	var out []vipCluster
	for _, p := range ports {
		dr := destinationRuleFor(m, p.svc.Hostname(), w.Namespace, p.svc.Namespace)
		if dr == nil {
			out = append(out, vipCluster{p: p})
			continue
		}
		out = append(out, vipCluster{p: p, dr: dr, policy: portTrafficPolicy(dr.Spec.GetTrafficPolicy(), p.port.Port)})
		for _, s := range dr.Spec.GetSubsets() {
			out = append(out, vipCluster{
				p: p, subset: s.GetName(), labels: s.GetLabels(), dr: dr,
				policy: mergeTrafficPolicy(dr.Spec.GetTrafficPolicy(), s.GetTrafficPolicy(), p.port.Port),
			})
		}
	}
	return out
}

// waypointClusters returns the waypoint's clusters: main_internal and encap (to the
// internal listeners of those names), connect_originate (HBONE to the destination pod's
// 15008), the double-HBONE pair, and the inbound-vip EDS clusters.
func waypointClusters(m *model.Model, w WaypointSpec, vips []vipCluster, tds []string) ([]types.Resource, error) {
	var out []types.Resource
	for _, c := range []struct{ name, listener string }{
		{MainInternalListener, MainInternalListener},
		{EncapCluster, ConnectOriginateListener},
	} {
		cl, err := internalCluster(c.name, c.listener)
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	// connect_originate also accepts the identities of the waypoint's own namespace, as
	// istiod's does.
	co, err := hboneOriginateCluster(ConnectOriginateListener, true, tds, "spiffe://"+tds[0]+"/ns/"+w.Namespace+"/sa/")
	if err != nil {
		return nil, err
	}
	out = append(out, co)
	inner, err := innerConnectOriginateCluster(tds)
	if err != nil {
		return nil, err
	}
	outer, err := hboneOriginateCluster(OuterConnectOriginate, false, tds)
	if err != nil {
		return nil, err
	}
	out = append(out, inner, outer)
	for _, v := range vips {
		var c *cluster.Cluster
		var err error
		if se := entryOf(m, v.p.svc); se != nil {
			c, err = inboundEntryCluster(m, w, v, se)
		} else {
			c, err = inboundVIPCluster(v)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// inboundEntryCluster is the cluster of one ServiceEntry host's port on an egress
// waypoint: STRICT_DNS to the host's target port, plaintext or originating TLS as the
// DestinationRule of the host says, built as a sidecar's outbound cluster of that host
// (istiod's waypoint builds it with the same cluster builder), named as the waypoint's.
func inboundEntryCluster(m *model.Model, w WaypointSpec, v vipCluster, se *model.IstioConfig[*networking.ServiceEntry]) (*cluster.Cluster, error) {
	sp := servicePort{svc: v.p.svc, port: v.p.port, host: v.p.svc.Host, se: se, seEndpoints: se.Spec.GetEndpoints()}
	c, err := outboundCluster(m, sp, outboundClusterSpec{name: v.name(), subset: v.subset, labels: v.labels, dr: v.dr, policy: v.policy, proxyNS: w.Namespace})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", v.name(), err)
	}
	c.AltStatName = statName(c.Name)
	c.Filters = nil // the sidecar's metadata exchange: a waypoint's peer metadata is its own
	return c, nil
}

// statName is istiod's alt_stat_name for a waypoint cluster: its name and the delimiter.
func statName(name string) string { return name + ";" }

// internalCluster is a static cluster whose one endpoint is the internal listener
// listenerName, speaking what the downstream spoke, over the internal upstream transport.
func internalCluster(name, listenerName string) (*cluster.Cluster, error) {
	opts, err := typed(&upstreamhttp.HttpProtocolOptions{
		CommonHttpProtocolOptions: &core.HttpProtocolOptions{IdleTimeout: durationpb.New(300e9)},
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions:  &core.Http1ProtocolOptions{},
				Http2ProtocolOptions: &core.Http2ProtocolOptions{},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	ts, err := internalUpstreamSocket(nil, false)
	if err != nil {
		return nil, err
	}
	return &cluster.Cluster{
		Name:                 name,
		AltStatName:          statName(name),
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		LoadAssignment: &endpoint.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints:   []*endpoint.LocalityLbEndpoints{{LbEndpoints: []*endpoint.LbEndpoint{internalEndpoint(listenerName, "")}}},
		},
		CircuitBreakers:               defaultCircuitBreakers(),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{HTTPProtocolOptionsKey: opts},
		TransportSocket:               ts,
	}, nil
}

// internalEndpoint is an endpoint that is the internal listener listenerName (with an
// endpoint id telling apart several endpoints on one listener).
func internalEndpoint(listenerName, id string) *endpoint.LbEndpoint {
	return &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
		Address: &core.Address{Address: &core.Address_EnvoyInternalAddress{EnvoyInternalAddress: &core.EnvoyInternalAddress{
			AddressNameSpecifier: &core.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listenerName},
			EndpointId:           id,
		}}},
	}}}
}

// internalUpstreamSocket is the internal upstream transport over inner (nil:
// plaintext); with passthrough, it hands the endpoint's original-destination and istio
// metadata to the internal listener's connection (which connect_originate dials from).
func internalUpstreamSocket(inner *core.TransportSocket, passthrough bool) (*core.TransportSocket, error) {
	if inner == nil {
		raw, err := rawBufferSocket()
		if err != nil {
			return nil, err
		}
		raw.Name = "raw_buffer" // istiod's short name here, where sidecars get Envoy's
		inner = raw
	}
	t := &internalupstream.InternalUpstreamTransport{TransportSocket: inner}
	if passthrough {
		host := &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Host_{Host: &metadatav3.MetadataKind_Host{}}}
		t.PassthroughMetadata = []*internalupstream.InternalUpstreamTransport_MetadataValueSource{
			{Kind: host, Name: originalDstMetadata},
			{Kind: host, Name: "istio"},
		}
	}
	cfg, err := typed(t)
	if err != nil {
		return nil, err
	}
	return &core.TransportSocket{Name: "internal_upstream", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// hboneTLSContext is the client side of HBONE's mutual TLS: TLS 1.3 only, ALPN h2, the
// workload certificate, the peer checked against the SPIFFE prefix of each of the mesh's
// trust domains tds (its trust domain and aliases, as istiod's TrustDomainsForValidation)
// and extra prefixes.
func hboneTLSContext(tds []string, extraPrefixes ...string) *tlsv3.CommonTlsContext {
	sans := []*tlsv3.SubjectAltNameMatcher{}
	var prefixes []string
	for _, td := range tds {
		prefixes = append(prefixes, "spiffe://"+td+"/")
	}
	for _, p := range append(prefixes, extraPrefixes...) {
		sans = append(sans, &tlsv3.SubjectAltNameMatcher{
			SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: p}},
		})
	}
	return &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		},
		AlpnProtocols:                  []string{"h2"},
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecretConfig(SecretCertificate)},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans},
				ValidationContextSdsSecretConfig: sdsSecretConfig(SecretRootCA),
			},
		},
	}
}

// hboneUpstreamSocket is the TLS transport socket of an HBONE origination.
func hboneUpstreamSocket(tds []string, extraPrefixes ...string) (*core.TransportSocket, error) {
	cfg, err := typed(&tlsv3.UpstreamTlsContext{CommonTlsContext: hboneTLSContext(tds, extraPrefixes...)})
	if err != nil {
		return nil, err
	}
	return &core.TransportSocket{Name: "tls", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// connectProtocolOptions is HTTP/2 with CONNECT, connections kept an hour idle; single
// makes every tunnel a connection of its own (the double-HBONE pair).
func connectProtocolOptions(single bool) (*anypb.Any, error) {
	common := &core.HttpProtocolOptions{IdleTimeout: durationpb.New(3600e9)}
	if single {
		common.MaxRequestsPerConnection = wrapperspb.UInt32(1)
	}
	return typed(&upstreamhttp.HttpProtocolOptions{
		CommonHttpProtocolOptions: common,
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
				Http2ProtocolOptions: &core.Http2ProtocolOptions{AllowConnect: true},
			},
		}},
	})
}

// hboneOriginateCluster is an ORIGINAL_DST cluster opening HBONE (HTTP/2 CONNECT over
// mutual TLS) to the destination's port 15008. connect_originate reads the destination
// from the connection's metadata ("waypoint" under original_dst's namespace) and accepts
// any identity of the trust domain; the outer double-HBONE cluster dials the
// connection's own destination, one tunnel per connection.
func hboneOriginateCluster(name string, metadataKey bool, tds []string, extraPrefixes ...string) (*cluster.Cluster, error) {
	opts, err := connectProtocolOptions(!metadataKey)
	if err != nil {
		return nil, err
	}
	ts, err := hboneUpstreamSocket(tds, extraPrefixes...)
	if err != nil {
		return nil, err
	}
	lb := &cluster.Cluster_OriginalDstLbConfig{UpstreamPortOverride: wrapperspb.UInt32(HBONEPort)}
	if metadataKey {
		lb.MetadataKey = &metadatav3.MetadataKey{Key: originalDstMetadata, Path: []*metadatav3.MetadataKey_PathSegment{
			{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: "waypoint"}},
		}}
	}
	return &cluster.Cluster{
		Name:                          name,
		AltStatName:                   statName(name),
		ClusterDiscoveryType:          &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
		ConnectTimeout:                connectTimeout,
		LbPolicy:                      cluster.Cluster_CLUSTER_PROVIDED,
		CircuitBreakers:               defaultCircuitBreakers(),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{HTTPProtocolOptionsKey: opts},
		CleanupInterval:               durationpb.New(60e9),
		LbConfig:                      &cluster.Cluster_OriginalDstLbConfig_{OriginalDstLbConfig: lb},
		TransportSocket:               ts,
	}, nil
}

// innerConnectOriginateCluster is the inner tunnel of double HBONE: CONNECT over mutual
// TLS carried by the internal listener outer_connect_originate.
func innerConnectOriginateCluster(tds []string) (*cluster.Cluster, error) {
	opts, err := connectProtocolOptions(true)
	if err != nil {
		return nil, err
	}
	tls, err := hboneUpstreamSocket(tds)
	if err != nil {
		return nil, err
	}
	cfg, err := typed(&internalupstream.InternalUpstreamTransport{TransportSocket: tls})
	if err != nil {
		return nil, err
	}
	return &cluster.Cluster{
		Name:                 InnerConnectOriginate,
		AltStatName:          statName(InnerConnectOriginate),
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		LoadAssignment: &endpoint.ClusterLoadAssignment{
			ClusterName: InnerConnectOriginate,
			Endpoints:   []*endpoint.LocalityLbEndpoints{{LbEndpoints: []*endpoint.LbEndpoint{internalEndpoint(OuterConnectOriginate, "")}}},
		},
		CircuitBreakers:               defaultCircuitBreakers(),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{HTTPProtocolOptionsKey: opts},
		TransportSocket:               &core.TransportSocket{Name: "internal_upstream_with_tls", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}},
	}, nil
}

// inboundVIPCluster is the EDS cluster of one service port (or subset): least-request
// over the service's pods (the subset's), each reached through connect_originate with its
// address passed along, shaped by the DestinationRule's traffic policy when it has one.
func inboundVIPCluster(v vipCluster) (*cluster.Cluster, error) {
	name := v.name()
	var inner *core.TransportSocket
	if mode := v.policy.GetTls().GetMode(); mode == networking.ClientTLSSettings_SIMPLE || mode == networking.ClientTLSSettings_MUTUAL {
		// As istiod's buildWaypointTLSContext: TLS to the app (credentialName's Secret
		// whatever the rule's workloadSelector, unlike a sidecar's), inside the internal
		// upstream transport, so connect_originate tunnels the TLS bytes over HBONE.
		// ISTIO_MUTUAL adds nothing: HBONE is the mutual TLS.
		var err error
		if inner, err = originationTLSSocket(v.p.svc.Hostname(), v.p.port.Protocol, v.policy.GetTls()); err != nil { // transportsocket.go
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	ts, err := internalUpstreamSocket(inner, true)
	if err != nil {
		return nil, err
	}
	md := servicesMetadata([]*structpb.Value{serviceMetadataOf(v.p.svc)})
	md.FilterMetadata["istio"].Fields["subset"] = structpb.NewStringValue(v.kind())
	if v.policy != nil {
		// istiod names the rule that shaped the cluster (istioctl's DESTINATION RULE).
		md.FilterMetadata["istio"].Fields["config"] = structpb.NewStringValue(IstioConfigPath("destination-rule", v.dr.Namespace, v.dr.Name))
	}
	c := &cluster.Cluster{
		Name:                 name,
		AltStatName:          statName(name),
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource(), ServiceName: name},
		ConnectTimeout:       connectTimeout,
		LbPolicy:             cluster.Cluster_LEAST_REQUEST,
		CircuitBreakers:      defaultCircuitBreakers(),
		CommonLbConfig:       &cluster.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{}},
		TransportSocket:      ts,
		Metadata:             md,
	}
	if v.policy != nil {
		if err := applyTrafficPolicy(c, v.policy, v.p.port.Protocol); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	// A gRPC or HTTP/2 port's cluster speaks HTTP/2 upstream, with or without a rule.
	return c, applyUpstreamProtocol(c, v.p.port.Protocol)
}

// serviceMetadataOf is a Kubernetes service's entry in a cluster's istio services list.
func serviceMetadataOf(s *model.Service) *structpb.Value {
	return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"host":      structpb.NewStringValue(s.Hostname()),
		"name":      structpb.NewStringValue(s.Name),
		"namespace": structpb.NewStringValue(s.Namespace),
	}})
}

// waypointEndpoints returns the load assignment of every inbound-vip cluster: the
// service's pods (by address; a subset's, those with its labels), each as istiod's
// endpoint builder writes it for a waypoint (waypointEndpoint).
func waypointEndpoints(m *model.Model, vips []vipCluster) []types.Resource {
	out := make([]types.Resource, 0, len(vips))
	for _, v := range vips {
		if v.p.svc.Host != "" {
			continue // a ServiceEntry host's STRICT_DNS cluster carries its own endpoints
		}
		p := v.p
		var pods []*model.Pod
		for _, pod := range m.Pods {
			if pod.Namespace == p.svc.Namespace && pod.IP.IsValid() && p.svc.Selects(pod.Labels) && labelsMatch(v.labels, pod.Labels) {
				pods = append(pods, pod)
			}
		}
		slices.SortFunc(pods, func(a, b *model.Pod) int { return a.IP.Compare(b.IP) })
		la := &endpoint.ClusterLoadAssignment{ClusterName: v.name()}
		if len(pods) > 0 {
			loc := &endpoint.LocalityLbEndpoints{Locality: &core.Locality{}, LoadBalancingWeight: wrapperspb.UInt32(uint32(len(pods)))}
			for _, pod := range pods {
				loc.LbEndpoints = append(loc.LbEndpoints, waypointEndpoint(m, pod, p.port.TargetPort))
			}
			la.Endpoints = []*endpoint.LocalityLbEndpoints{loc}
		}
		out = append(out, la)
	}
	return out
}

// waypointEndpoint is pod's endpoint on port in a waypoint's inbound-vip cluster, by
// whether the pod speaks HBONE (waypointTunnelsTo), as istiod's endpoint builder decides
// for a waypoint (buildIstioEndpoint with supportTunnel; a waypoint never prefers
// legacy mTLS): one that does is the internal listener connect_originate with the pod's
// address:port as endpoint id and original destination; one that does not (a pod out of
// the mesh, a sidecar's, a gateway's) is its own address, which the cluster's internal
// upstream transport reaches over its raw buffer, in plaintext, with the metadata a
// sidecar's cluster gives it (a sidecar's tlsMode mark among them, which the waypoint's
// cluster has no transport socket match to act on). A waypoint dialling such a pod over
// HBONE would reach no ztunnel there and answer 503 UC.
func waypointEndpoint(m *model.Model, pod *model.Pod, port uint16) *endpoint.LbEndpoint {
	target := netip.AddrPortFrom(pod.IP, port).String()
	var e *endpoint.LbEndpoint
	if waypointTunnelsTo(pod) {
		e = internalEndpoint(ConnectOriginateListener, target)
		e.Metadata = &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
			originalDstMetadata: {Fields: map[string]*structpb.Value{"local": structpb.NewStringValue(target)}},
			"istio":             {Fields: map[string]*structpb.Value{"workload": structpb.NewStringValue(ambientWorkloadID(pod))}},
		}}
	} else {
		e = &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: socketAddress(pod.IP.String(), port)}}}
		e.Metadata = endpointMetadata(m, pod, port)
		if e.Metadata == nil {
			e.Metadata = &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
				"istio": {Fields: map[string]*structpb.Value{"workload": structpb.NewStringValue(ambientWorkloadID(pod))}},
			}}
		}
	}
	e.HealthStatus = core.HealthStatus_HEALTHY
	e.LoadBalancingWeight = wrapperspb.UInt32(1)
	return e
}

// waypointTunnelsTo reports whether a waypoint reaches pod over HBONE, istiod's
// supportTunnel: the pod is another waypoint (gateway.istio.io/managed by the mesh
// controller), names http among its native tunnel protocols
// (networking.istio.io/tunnel), or is redirected to ztunnel (the node agent's
// annotation, which gives its workload tunnel protocol HBONE). Unlike a sidecar's
// (tunnelsTo), a sidecar pod is no exception: it has no HBONE unless it says so.
func waypointTunnelsTo(pod *model.Pod) bool {
	if pod.Labels[model.LabelGatewayManaged] == model.ManagedByMeshController {
		return true
	}
	if slices.Contains(strings.Split(pod.Labels[tunnelLabel], ","), TunnelHTTP) {
		return true
	}
	return pod.AmbientRedirected()
}

// portString is a port as the filter-chain matcher's exact map keys it.
func portString(p uint16) string { return strconv.Itoa(int(p)) }

// ambientWorkloadID is workloadID for a pod without a sidecar: no injector gave it a
// canonical revision label, so the revision is its version label or empty.
func ambientWorkloadID(pod *model.Pod) string {
	svc := cmp.Or(pod.Labels["app"], pod.Workload)
	return fmt.Sprintf("%s;%s;%s;%s;Kubernetes", pod.Workload, pod.Namespace, svc, pod.Labels["version"])
}
