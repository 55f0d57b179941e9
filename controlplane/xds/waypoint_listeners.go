package xds

import (
	"net/netip"
	"slices"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	xdsmatcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	setstate "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpsetstate "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	httpinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldst "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netsetstate "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	netinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Filter-state keys a waypoint sets: the original destination Envoy's original_dst
// listener filter restores on an internal listener's connection, and Istio's own.
const (
	originalDstLocalIP  = "envoy.filters.listener.original_dst.local_ip"
	originalDstRemoteIP = "envoy.filters.listener.original_dst.remote_ip"
	hashableString      = "istio.hashable_string"
	connectAuthority    = "connect_authority"
)

// waypointListeners returns the waypoint's listeners: connect_terminate, main_internal,
// connect_originate and the double-HBONE pair.
func waypointListeners(m *model.Model, w *model.Waypoint, ports []waypointPort) ([]types.Resource, error) {
	logs, err := accessLogs(waypointMesh(m, w))
	if err != nil {
		return nil, err
	}
	ct, err := connectTerminateListener(logs, m.Mesh.TrustDomains())
	if err != nil {
		return nil, err
	}
	mi, err := mainInternalListener(m, w, ports, logs)
	if err != nil {
		return nil, err
	}
	services := make(map[string]*model.Service, len(ports))
	for _, p := range ports {
		services[p.name()] = p.svc
	}
	if err := addWaypointStats(m, w, mi, services); err != nil {
		return nil, err
	}
	co, err := connectOriginateListener(logs)
	if err != nil {
		return nil, err
	}
	inner, err := innerConnectOriginateListener(logs)
	if err != nil {
		return nil, err
	}
	outer, err := outerConnectOriginateListener(logs)
	if err != nil {
		return nil, err
	}
	return []types.Resource{ct, mi, co, inner, outer}, nil
}

// withFilter returns copies of logs that log only what f lets through.
func withFilter(logs []*accesslogv3.AccessLog, f *accesslogv3.AccessLogFilter) []*accesslogv3.AccessLog {
	out := make([]*accesslogv3.AccessLog, 0, len(logs))
	for _, l := range logs {
		c := proto.Clone(l).(*accesslogv3.AccessLog)
		c.Filter = f
		out = append(out, c)
	}
	return out
}

// responseFlagLogs logs only responses with one of the flags (NR: no chain matched; UF:
// the upstream connection failed).
func responseFlagLogs(logs []*accesslogv3.AccessLog, flags ...string) []*accesslogv3.AccessLog {
	return withFilter(logs, &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
		ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: flags},
	}})
}

// stateValue sets filter-state key from format, shared with the upstream connection.
func stateValue(key, factory, format string, shared setstate.FilterStateValue_SharedWithUpstream) *setstate.FilterStateValue {
	return &setstate.FilterStateValue{
		Key:        &setstate.FilterStateValue_ObjectKey{ObjectKey: key},
		FactoryKey: factory,
		Value: &setstate.FilterStateValue_FormatString{FormatString: &core.SubstitutionFormatString{
			Format: &core.SubstitutionFormatString_TextFormatSource{TextFormatSource: &core.DataSource{
				Specifier: &core.DataSource_InlineString{InlineString: format},
			}},
		}},
		SharedWithUpstream: shared,
	}
}

func httpFilter(name string, cfg proto.Message) (*hcm.HttpFilter, error) {
	a, err := typed(cfg)
	if err != nil {
		return nil, err
	}
	return &hcm.HttpFilter{Name: name, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: a}}, nil
}

func networkFilter(name string, cfg proto.Message) (*listener.Filter, error) {
	a, err := typed(cfg)
	if err != nil {
		return nil, err
	}
	return &listener.Filter{Name: name, ConfigType: &listener.Filter_TypedConfig{TypedConfig: a}}, nil
}

// waypointPeerMetadata is the peer_metadata filter of a waypoint: on connect_terminate it
// finds the client's workload (over WDS) and shares it with the upstream (main_internal);
// on main_internal's connection managers it finds the destination's.
func waypointPeerMetadata(downstream bool) (*hcm.HttpFilter, error) {
	discovery := []any{map[string]any{"workload_discovery": map[string]any{}}}
	name, fields := "waypoint_upstream_peer_metadata", map[string]any{"upstream_discovery": discovery}
	if downstream {
		name, fields = "waypoint_downstream_peer_metadata", map[string]any{"downstream_discovery": discovery, "shared_with_upstream": true}
	}
	cfg, err := typedStruct(peerMetadataConfigType, fields)
	if err != nil {
		return nil, err
	}
	return &hcm.HttpFilter{Name: name, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg}}, nil
}

// connectTerminateListener accepts HBONE on 0.0.0.0:15008: mutual TLS 1.3 (any identity
// of the trust domain), HTTP/2 CONNECT, every stream routed to main_internal with its
// :authority saved as the original destination (and the peer's identities as Istio's
// filter state).
func connectTerminateListener(logs []*accesslogv3.AccessLog, tds []string) (*listener.Listener, error) {
	peer, err := waypointPeerMetadata(true)
	if err != nil {
		return nil, err
	}
	once := setstate.FilterStateValue_ONCE
	authority, err := httpFilter(connectAuthority, &httpsetstate.Config{OnRequestHeaders: []*setstate.FilterStateValue{
		stateValue(originalDstLocalIP, "", "%REQ(:AUTHORITY)%", once),
		stateValue("io.istio.connect_authority", hashableString, "%REQ(:AUTHORITY)%", once),
		stateValue(originalDstRemoteIP, "", "%DOWNSTREAM_REMOTE_ADDRESS%", once),
		stateValue("io.istio.peer_principal", hashableString, "%DOWNSTREAM_PEER_URI_SAN%", once),
		stateValue("io.istio.local_principal", hashableString, "%DOWNSTREAM_LOCAL_URI_SAN%", once),
	}})
	if err != nil {
		return nil, err
	}
	router, err := httpFilter(wellknown.Router, &routerv3.Router{})
	if err != nil {
		return nil, err
	}
	// The connection manager logs only failed tunnels (status >= 400): a tunnel's
	// requests are logged by main_internal's.
	errorsOnly := withFilter(logs, &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{
		StatusCodeFilter: &accesslogv3.StatusCodeFilter{Comparison: &accesslogv3.ComparisonFilter{
			Op:    accesslogv3.ComparisonFilter_GE,
			Value: &core.RuntimeUInt32{DefaultValue: 400, RuntimeKey: "istio.io/unset"},
		}},
	}})
	mgr := &hcm.HttpConnectionManager{
		StatPrefix: ConnectTerminateListener,
		RouteSpecifier: &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
			Name: "default",
			VirtualHosts: []*route.VirtualHost{{
				Name: "default", Domains: []string{"*"},
				Routes: []*route.Route{{
					Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_ConnectMatcher_{ConnectMatcher: &route.RouteMatch_ConnectMatcher{}}},
					Action: &route.Route_Route{Route: &route.RouteAction{
						ClusterSpecifier: &route.RouteAction_Cluster{Cluster: MainInternalListener},
						UpgradeConfigs: []*route.RouteAction_UpgradeConfig{{
							UpgradeType: "CONNECT", ConnectConfig: &route.RouteAction_UpgradeConfig_ConnectConfig{},
						}},
					}},
				}},
			}},
		}},
		HttpFilters: []*hcm.HttpFilter{peer, authority, router},
		Http2ProtocolOptions: &core.Http2ProtocolOptions{
			MaxConcurrentStreams: wrapperspb.UInt32(100),
			AllowConnect:         true,
			ConnectionKeepalive:  &core.KeepaliveSettings{Interval: durationpb.New(10e9), Timeout: durationpb.New(20e9)},
		},
		ServerName:                  "istio-envoy",
		StreamIdleTimeout:           durationpb.New(0),
		AccessLog:                   errorsOnly,
		UseRemoteAddress:            wrapperspb.Bool(false),
		ForwardClientCertDetails:    hcm.HttpConnectionManager_APPEND_FORWARD,
		SetCurrentClientCertDetails: &hcm.HttpConnectionManager_SetCurrentClientCertDetails{Subject: wrapperspb.Bool(true), Dns: true, Uri: true},
		UpgradeConfigs:              []*hcm.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}},
	}
	f, err := networkFilter(wellknown.HTTPConnectionManager, mgr)
	if err != nil {
		return nil, err
	}
	tls, err := typed(&tlsv3.DownstreamTlsContext{
		CommonTlsContext:         hboneTLSContext(tds),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	return &listener.Listener{
		Name:    ConnectTerminateListener,
		Address: socketAddress("0.0.0.0", HBONEPort),
		FilterChains: []*listener.FilterChain{{
			Name:    "default",
			Filters: []*listener.Filter{f},
			TransportSocket: &core.TransportSocket{
				Name: "tls", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: tls},
			},
		}},
		ConnectionBalanceConfig: &listener.Listener_ConnectionBalanceConfig{BalanceType: &listener.Listener_ConnectionBalanceConfig_ExactBalance_{
			ExactBalance: &listener.Listener_ConnectionBalanceConfig_ExactBalance{},
		}},
		AccessLog: responseFlagLogs(logs, "NR"),
	}, nil
}

// mainInternalListener is the internal listener connect_terminate's tunnels arrive on,
// their destination restored by original_dst: a unified matcher picks the chain by
// destination VIP then port, one chain per service port (ports of a known protocol skip
// the HTTP inspector), and by the IP of a workload that uses the waypoint then the
// application protocol the HTTP inspector found, direct-http or direct-tcp (with such a
// workload any port may carry HTTP, so the inspector runs on every port).
func mainInternalListener(m *model.Model, w *model.Waypoint, ports []waypointPort, logs []*accesslogv3.AccessLog) (*listener.Listener, error) {
	od, err := typed(&originaldst.OriginalDst{})
	if err != nil {
		return nil, err
	}
	hi, err := typed(&httpinspector.HttpInspector{})
	if err != nil {
		return nil, err
	}
	var knownPorts []uint32
	var chains []*listener.FilterChain
	served := servedHosts(ports)
	tr := waypointTracing(m, w) // tracing_default.go: every connection manager's
	for _, p := range ports {
		fc, err := inboundVIPChain(m, w, served, p, logs, tr)
		if err != nil {
			return nil, err
		}
		chains = append(chains, fc)
		// Every port of a declared protocol skips the inspector (istiod sniffs only
		// ports of no protocol, which a lab's ports always have).
		knownPorts = append(knownPorts, uint32(p.port.Port))
	}
	direct, err := directChains(m, w, logs, tr)
	if err != nil {
		return nil, err
	}
	chains = append(chains, direct...)
	slices.Sort(knownPorts)
	knownPorts = slices.Compact(knownPorts)
	workloads := WaypointWorkloads(m, w)
	inspector := &listener.ListenerFilter{Name: wellknown.HTTPInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: hi}}
	if len(workloads) == 0 {
		inspector.FilterDisabled = excludePorts(knownPorts)
	}
	filters := []*listener.ListenerFilter{
		{Name: wellknown.OriginalDestination, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: od}},
		inspector,
	}
	if tls, err := waypointTLSInspector(ports); err != nil {
		return nil, err
	} else if tls != nil {
		filters = append(filters, tls)
	}
	fcm, err := vipPortMatcher(ports, workloads)
	if err != nil {
		return nil, err
	}
	return &listener.Listener{
		Name:               MainInternalListener,
		FilterChainMatcher: fcm,
		FilterChains:       chains,
		ListenerFilters:    filters,
		TrafficDirection:   core.TrafficDirection_INBOUND,
		AccessLog:          responseFlagLogs(logs, "NR"),
		ListenerSpecifier:  &listener.Listener_InternalListener{InternalListener: &listener.Listener_InternalListenerConfig{}},
	}, nil
}

// waypointTLSInspector is main_internal's TLS inspector, as istiod's waypoint has it: when
// a service port carries the client's TLS (TLS, HTTPS), the inspector reads its
// ClientHello (the SNI for logs and policy), disabled on the ports that never carry TLS;
// without such a port, none (nil).
func waypointTLSInspector(ports []waypointPort) (*listener.ListenerFilter, error) {
	tlsPorts, plain := map[uint16]bool{}, map[uint16]bool{}
	for _, p := range ports {
		if p.port.Protocol.IsTLS() {
			tlsPorts[p.port.Port] = true
		} else {
			plain[p.port.Port] = true
		}
	}
	if len(tlsPorts) == 0 {
		return nil, nil
	}
	ti, err := typed(&tlsinspector.TlsInspector{InitialReadBufferSize: wrapperspb.UInt32(512)}) // istiod's xdsfilters.TLSInspector
	if err != nil {
		return nil, err
	}
	f := &listener.ListenerFilter{Name: wellknown.TLSInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: ti}}
	var off []uint32
	for p := range plain {
		if !tlsPorts[p] { // a port number TLS on one service and plain on another keeps it
			off = append(off, uint32(p))
		}
	}
	slices.Sort(off)
	f.FilterDisabled = excludePorts(off)
	return f, nil
}

// vipPortMatcher is main_internal's unified filter-chain matcher: destination IP (each
// service VIP, /32) then destination port (exact) to the chain's name; after the VIPs,
// the workloads' addresses (workloadRange).
func vipPortMatcher(ports []waypointPort, workloads []netip.Addr) (*xdsmatcher.Matcher, error) {
	ipInput, err := typed(&netinputs.DestinationIPInput{})
	if err != nil {
		return nil, err
	}
	portInput, err := typed(&netinputs.DestinationPortInput{})
	if err != nil {
		return nil, err
	}
	type vip struct {
		addr  string
		chain map[string]*xdsmatcher.Matcher_OnMatch
	}
	var vips []*vip
	byAddr := map[string]*vip{}
	for _, p := range ports {
		a := p.svc.VIP.String()
		v := byAddr[a]
		if v == nil {
			v = &vip{addr: a, chain: map[string]*xdsmatcher.Matcher_OnMatch{}}
			byAddr[a] = v
			vips = append(vips, v)
		}
		action, err := typed(wrapperspb.String(p.name()))
		if err != nil {
			return nil, err
		}
		v.chain[portString(p.port.Port)] = &xdsmatcher.Matcher_OnMatch{OnMatch: &xdsmatcher.Matcher_OnMatch_Action{
			Action: &xdscore.TypedExtensionConfig{Name: p.name(), TypedConfig: action},
		}}
	}
	ipm := &xdsmatcher.IPMatcher{}
	for _, v := range vips {
		ipm.RangeMatchers = append(ipm.RangeMatchers, &xdsmatcher.IPMatcher_IPRangeMatcher{
			Ranges: []*xdscore.CidrRange{{AddressPrefix: v.addr, PrefixLen: wrapperspb.UInt32(32)}},
			OnMatch: &xdsmatcher.Matcher_OnMatch{OnMatch: &xdsmatcher.Matcher_OnMatch_Matcher{Matcher: &xdsmatcher.Matcher{
				MatcherType: &xdsmatcher.Matcher_MatcherTree_{MatcherTree: &xdsmatcher.Matcher_MatcherTree{
					Input: &xdscore.TypedExtensionConfig{Name: "port", TypedConfig: portInput},
					TreeType: &xdsmatcher.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &xdsmatcher.Matcher_MatcherTree_MatchMap{
						Map: v.chain,
					}},
				}},
			}}},
		})
	}
	if len(workloads) > 0 {
		wr, err := workloadRange(workloads)
		if err != nil {
			return nil, err
		}
		ipm.RangeMatchers = append(ipm.RangeMatchers, wr)
	}
	custom, err := typed(ipm)
	if err != nil {
		return nil, err
	}
	return &xdsmatcher.Matcher{MatcherType: &xdsmatcher.Matcher_MatcherTree_{MatcherTree: &xdsmatcher.Matcher_MatcherTree{
		Input:    &xdscore.TypedExtensionConfig{Name: "ip", TypedConfig: ipInput},
		TreeType: &xdsmatcher.Matcher_MatcherTree_CustomMatch{CustomMatch: &xdscore.TypedExtensionConfig{Name: "ip", TypedConfig: custom}},
	}}}, nil
}

// workloadRange is main_internal's range matcher of the workloads that use the
// waypoint: every one's address (/32, /128), then the application protocol the HTTP
// inspector found, HTTP/1.1 or h2c to direct-http and anything else to direct-tcp, as
// istiod's waypoint (HTTP/1.0 only with PILOT_HTTP10, which a lab's istiod leaves off).
func workloadRange(workloads []netip.Addr) (*xdsmatcher.IPMatcher_IPRangeMatcher, error) {
	protoInput, err := typed(&netinputs.ApplicationProtocolInput{})
	if err != nil {
		return nil, err
	}
	toChain := func(name string) (*xdsmatcher.Matcher_OnMatch, error) {
		a, err := typed(wrapperspb.String(name))
		if err != nil {
			return nil, err
		}
		return &xdsmatcher.Matcher_OnMatch{OnMatch: &xdsmatcher.Matcher_OnMatch_Action{
			Action: &xdscore.TypedExtensionConfig{Name: name, TypedConfig: a},
		}}, nil
	}
	http, err := toChain("direct-http")
	if err != nil {
		return nil, err
	}
	tcp, err := toChain("direct-tcp")
	if err != nil {
		return nil, err
	}
	r := &xdsmatcher.IPMatcher_IPRangeMatcher{OnMatch: &xdsmatcher.Matcher_OnMatch{OnMatch: &xdsmatcher.Matcher_OnMatch_Matcher{Matcher: &xdsmatcher.Matcher{
		MatcherType: &xdsmatcher.Matcher_MatcherTree_{MatcherTree: &xdsmatcher.Matcher_MatcherTree{
			Input: &xdscore.TypedExtensionConfig{Name: "application-protocol", TypedConfig: protoInput},
			TreeType: &xdsmatcher.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &xdsmatcher.Matcher_MatcherTree_MatchMap{
				Map: map[string]*xdsmatcher.Matcher_OnMatch{"'h2c'": http, "'http/1.1'": http},
			}},
		}},
		OnNoMatch: tcp,
	}}}}
	for _, a := range workloads {
		r.Ranges = append(r.Ranges, &xdscore.CidrRange{AddressPrefix: a.String(), PrefixLen: wrapperspb.UInt32(uint32(a.BitLen()))})
	}
	return r, nil
}

// waypointHCM is a main_internal connection manager: a sidecar inbound one (hcmFilter)
// with the chain's authorization filters (authz.httpFilters) first and the waypoint's
// upstream peer_metadata before the router, the route inline.
func waypointHCM(statPrefix string, rc *route.RouteConfiguration, logs []*accesslogv3.AccessLog, az authz, http2 bool, tr *hcm.HttpConnectionManager_Tracing) (*listener.Filter, error) {
	peer, err := waypointPeerMetadata(false)
	if err != nil {
		return nil, err
	}
	pre, err := az.httpFilters()
	if err != nil {
		return nil, err
	}
	return hcmFilter(statPrefix, false, func(h *hcm.HttpConnectionManager) {
		n := len(h.HttpFilters)
		fs := append(slices.Clone(pre), h.HttpFilters[:n-1]...)
		h.HttpFilters = append(fs, peer, h.HttpFilters[n-1])
		h.ServerName = "istio-envoy"
		h.AccessLog = logs
		h.RouteSpecifier = &hcm.HttpConnectionManager_RouteConfig{RouteConfig: rc}
		// istiod's buildHTTPConnectionManager: the tracing block (tracing_default.go)
		// and the UUID request id extension, with or without tracing.
		h.Tracing = tr
		h.RequestIdExtension = uuidRequestID()
		if http2 {
			// A gRPC or HTTP/2 port's chain: istiod's inbound connection manager of
			// such a port sets (empty) HTTP/2 options.
			h.Http2ProtocolOptions = &core.Http2ProtocolOptions{}
		}
	})
}

// inboundVIPRoute is the inline route configuration of one service port: every request
// to its cluster, as istiod's default inbound route with its default retries.
func inboundVIPRoute(name, vhost, cluster, operation string) *route.RouteConfiguration {
	return &route.RouteConfiguration{
		Name: name,
		VirtualHosts: []*route.VirtualHost{{
			Name: vhost, Domains: []string{"*"},
			Routes: []*route.Route{defaultOutboundRoute(cluster, operation)},
		}},
		ValidateClusters:               wrapperspb.Bool(false),
		MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(1 << 20),
	}
}

// inboundVIPChain is main_internal's chain of one service port: HTTP through a
// connection manager routing to the port's cluster, anything else through tcp_proxy.
func inboundVIPChain(m *model.Model, w *model.Waypoint, served map[string]*model.Service, p waypointPort, logs []*accesslogv3.AccessLog, tr *hcm.HttpConnectionManager_Tracing) (*listener.FilterChain, error) {
	name := p.name()
	statPrefix := "inbound_0.0.0.0_" + portString(p.port.Port) + ";"
	if !p.port.Protocol.IsHTTPOrSniffed() {
		f, err := networkFilter(wellknown.TCPProxy, waypointTCPProxy(m, served, w, p, &tcpproxy.TcpProxy{StatPrefix: name, AccessLog: logs}))
		if err != nil {
			return nil, err
		}
		fs, err := waypointTCPFilters(waypointAuthz(m, w, p.svc, true), f)
		if err != nil {
			return nil, err
		}
		return &listener.FilterChain{Name: name, Filters: fs}, nil
	}
	rc, err := waypointRouteConfig(m, w, served, p)
	if err != nil {
		return nil, err
	}
	az := waypointAuthz(m, w, p.svc, false)
	if az.ext, err = waypointExtensions(m, w, p.svc, uint32(p.port.Port)); err != nil {
		return nil, err
	}
	f, err := waypointHCM(statPrefix, rc, logs, az, isHTTP2(p.port.Protocol), tr)
	if err != nil {
		return nil, err
	}
	return &listener.FilterChain{Name: name, Filters: []*listener.Filter{f}}, nil
}

// directChains are main_internal's chains for destinations no service matches (a
// workload addressed directly): the destination re-set for the upstream, then to the
// encap cluster (connect_originate) as TCP or HTTP.
func directChains(m *model.Model, w *model.Waypoint, logs []*accesslogv3.AccessLog, tr *hcm.HttpConnectionManager_Tracing) ([]*listener.FilterChain, error) {
	keep, err := networkFilter(connectAuthority, &netsetstate.Config{OnNewConnection: []*setstate.FilterStateValue{
		stateValue(originalDstLocalIP, "", "%FILTER_STATE("+originalDstLocalIP+":PLAIN)%", setstate.FilterStateValue_ONCE),
	}})
	if err != nil {
		return nil, err
	}
	tcp, err := networkFilter(wellknown.TCPProxy, &tcpproxy.TcpProxy{
		StatPrefix:       EncapCluster,
		ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: EncapCluster},
		AccessLog:        logs,
	})
	if err != nil {
		return nil, err
	}
	tcpFilters, err := waypointTCPFilters(waypointAuthz(m, w, nil, true), tcp)
	if err != nil {
		return nil, err
	}
	rc := inboundVIPRoute(EncapCluster, "inbound|http|0", EncapCluster, ":0/*")
	az := waypointAuthz(m, w, nil, false)
	if az.ext, err = waypointExtensions(m, w, nil, 0); err != nil {
		return nil, err
	}
	h, err := waypointHCM("inbound_0.0.0.0_0;", rc, logs, az, false, tr)
	if err != nil {
		return nil, err
	}
	return []*listener.FilterChain{
		{Name: "direct-tcp", Filters: append([]*listener.Filter{keep}, tcpFilters...)},
		{Name: "direct-http", Filters: []*listener.Filter{keep, h}},
	}, nil
}

// waypointTCPFilters is the network filter stack of a waypoint's TCP chain ending in
// tcp: the metadata exchange first, then the chain's network RBAC filters, as istiod's
// buildCompleteNetworkFilters for a waypoint.
func waypointTCPFilters(az authz, tcp *listener.Filter) ([]*listener.Filter, error) {
	mx, err := mxConfig()
	if err != nil {
		return nil, err
	}
	rbac, err := az.networkFilters()
	if err != nil {
		return nil, err
	}
	fs := []*listener.Filter{{Name: MetadataExchangeFilter, ConfigType: &listener.Filter_TypedConfig{TypedConfig: mx}}}
	fs = append(fs, rbac...)
	return append(fs, tcp), nil
}

// internalListener is an internal listener (no address) of the given chains.
func internalListener(name string, filters []*listener.Filter, originalDst bool, logs []*accesslogv3.AccessLog) (*listener.Listener, error) {
	l := &listener.Listener{
		Name:              name,
		FilterChains:      []*listener.FilterChain{{Filters: filters}},
		UseOriginalDst:    wrapperspb.Bool(false),
		AccessLog:         logs,
		ListenerSpecifier: &listener.Listener_InternalListener{InternalListener: &listener.Listener_InternalListenerConfig{}},
	}
	if originalDst {
		od, err := typed(&originaldst.OriginalDst{})
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listener.ListenerFilter{{Name: wellknown.OriginalDestination, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: od}}}
	}
	return l, nil
}

// connectOriginateListener tunnels each connection to its original destination (the
// endpoint's metadata) over HBONE: tcp_proxy CONNECTs to that address through the
// connect_originate cluster.
func connectOriginateListener(logs []*accesslogv3.AccessLog) (*listener.Listener, error) {
	f, err := networkFilter(wellknown.TCPProxy, &tcpproxy.TcpProxy{
		StatPrefix:       ConnectOriginateListener,
		ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: ConnectOriginateListener},
		AccessLog:        responseFlagLogs(logs, "UF"),
		TunnelingConfig:  &tcpproxy.TcpProxy_TunnelingConfig{Hostname: "%DOWNSTREAM_LOCAL_ADDRESS%"},
	})
	if err != nil {
		return nil, err
	}
	return internalListener(ConnectOriginateListener, []*listener.Filter{f}, true, responseFlagLogs(logs, "NR"))
}

// innerConnectOriginateListener and outerConnectOriginateListener are istiod's double
// HBONE (a CONNECT inside a CONNECT, through another network's east-west gateway).
func innerConnectOriginateListener(logs []*accesslogv3.AccessLog) (*listener.Listener, error) {
	transitive := setstate.FilterStateValue_TRANSITIVE
	prop, err := networkFilter("propagate_endpoint_metadata", &netsetstate.Config{OnNewConnection: []*setstate.FilterStateValue{
		stateValue(originalDstLocalIP, "", "%DYNAMIC_METADATA("+originalDstMetadata+":local)%", transitive),
		stateValue("istio.double_hbone.hbone_target_address", hashableString, "%DYNAMIC_METADATA(istio:double_hbone:hbone_target_address)%", transitive),
	}})
	if err != nil {
		return nil, err
	}
	tcp, err := networkFilter(wellknown.TCPProxy, &tcpproxy.TcpProxy{
		StatPrefix:       InnerConnectOriginate,
		ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: InnerConnectOriginate},
		AccessLog:        responseFlagLogs(logs, "UF"),
		TunnelingConfig: &tcpproxy.TcpProxy_TunnelingConfig{
			Hostname: "%FILTER_STATE(istio.double_hbone.hbone_target_address:PLAIN)%",
			HeadersToAdd: []*core.HeaderValueOption{{
				Header:       &core.HeaderValue{Key: "x-forwarded-network"},
				AppendAction: core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	return internalListener(InnerConnectOriginate, []*listener.Filter{prop, tcp}, false, responseFlagLogs(logs, "NR"))
}

func outerConnectOriginateListener(logs []*accesslogv3.AccessLog) (*listener.Listener, error) {
	tcp, err := networkFilter(wellknown.TCPProxy, &tcpproxy.TcpProxy{
		StatPrefix:       OuterConnectOriginate,
		ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: OuterConnectOriginate},
		AccessLog:        responseFlagLogs(logs, "UF"),
		TunnelingConfig: &tcpproxy.TcpProxy_TunnelingConfig{
			Hostname: "%FILTER_STATE(istio.double_hbone.hbone_target_address:PLAIN)%",
			HeadersToAdd: []*core.HeaderValueOption{{
				Header:       &core.HeaderValue{Key: "x-istio-source", Value: "waypoint"},
				AppendAction: core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	return internalListener(OuterConnectOriginate, []*listener.Filter{tcp}, true, responseFlagLogs(logs, "NR"))
}
