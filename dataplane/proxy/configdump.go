package proxy

import (
	"sort"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// ConfigDump returns Envoy's /config_dump: bootstrap, clusters, (endpoints with
// includeEDS), listeners, scoped routes, routes and secrets, in Envoy's order.
func (s *Server) ConfigDump(includeEDS bool) *adminv3.ConfigDump {
	s.mu.Lock()
	defer s.mu.Unlock()
	started := timestamppb.New(s.start)
	boot := proto.Clone(s.boot)
	dumps := []proto.Message{
		&adminv3.BootstrapConfigDump{Bootstrap: bootWithNode(boot, s), LastUpdated: started},
		s.clustersDump(started),
	}
	if includeEDS {
		dumps = append(dumps, s.endpointsDump())
	}
	dumps = append(dumps, s.listenersDump(started), &adminv3.ScopedRoutesConfigDump{}, s.routesDump(started), s.secretsDump())
	out := &adminv3.ConfigDump{}
	for _, d := range dumps {
		a, err := anypb.New(d)
		if err == nil {
			out.Configs = append(out.Configs, a)
		}
	}
	return out
}

func bootWithNode(m proto.Message, s *Server) *bootstrapMsg {
	b := m.(*bootstrapMsg)
	b.Node = proto.Clone(s.node).(*nodeMsg)
	return b
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		return nil
	}
	return a
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func (s *Server) clustersDump(started *timestamppb.Timestamp) *adminv3.ClustersConfigDump {
	d := &adminv3.ClustersConfigDump{}
	for _, c := range s.boot.GetStaticResources().GetClusters() {
		d.StaticClusters = append(d.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{Cluster: mustAny(c), LastUpdated: started})
	}
	td := s.dyn[xdsclient.ClusterType]
	if td != nil {
		d.VersionInfo = td.version
	}
	for _, r := range td.sorted() {
		d.DynamicActiveClusters = append(d.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{
			VersionInfo: r.version, Cluster: mustAny(r.msg), LastUpdated: ts(r.updated),
		})
	}
	return d
}

func (s *Server) endpointsDump() *adminv3.EndpointsConfigDump {
	d := &adminv3.EndpointsConfigDump{}
	for _, c := range s.boot.GetStaticResources().GetClusters() {
		if la := c.GetLoadAssignment(); la != nil {
			d.StaticEndpointConfigs = append(d.StaticEndpointConfigs, &adminv3.EndpointsConfigDump_StaticEndpointConfig{EndpointConfig: mustAny(la)})
		}
	}
	for _, r := range s.dyn[xdsclient.EndpointType].sorted() {
		d.DynamicEndpointConfigs = append(d.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{
			VersionInfo: r.version, EndpointConfig: mustAny(r.msg), LastUpdated: ts(r.updated),
		})
	}
	return d
}

func (s *Server) listenersDump(started *timestamppb.Timestamp) *adminv3.ListenersConfigDump {
	d := &adminv3.ListenersConfigDump{}
	for _, l := range s.boot.GetStaticResources().GetListeners() {
		d.StaticListeners = append(d.StaticListeners, &adminv3.ListenersConfigDump_StaticListener{Listener: mustAny(l), LastUpdated: started})
	}
	td := s.dyn[xdsclient.ListenerType]
	if td != nil {
		d.VersionInfo = td.version
	}
	// As Envoy's dumpListenerConfigs: each listener by name with its active state and,
	// when the last update refused it, its error_state; then one unnamed entry per
	// refusal of that update.
	named, overall := td.errorStates()
	byName := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
	for _, r := range td.sorted() {
		byName[r.name] = &adminv3.ListenersConfigDump_DynamicListener{
			Name: r.name,
			ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{
				VersionInfo: r.version, Listener: mustAny(r.msg), LastUpdated: ts(r.updated),
			},
		}
	}
	for name, st := range named {
		dl, ok := byName[name]
		if !ok {
			dl = &adminv3.ListenersConfigDump_DynamicListener{Name: name}
			byName[name] = dl
		}
		dl.ErrorState = st
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d.DynamicListeners = append(d.DynamicListeners, byName[n])
	}
	for _, st := range overall {
		d.DynamicListeners = append(d.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{ErrorState: st})
	}
	return d
}

func (s *Server) routesDump(started *timestamppb.Timestamp) *adminv3.RoutesConfigDump {
	d := &adminv3.RoutesConfigDump{}
	// Envoy lists inline route configurations of every HCM as static route configs.
	var inline []proto.Message
	for _, l := range s.boot.GetStaticResources().GetListeners() {
		inline = append(inline, inlineRoutes(l)...)
	}
	for _, r := range s.dyn[xdsclient.ListenerType].sorted() {
		inline = append(inline, inlineRoutes(r.msg.(*listenerMsg))...)
	}
	for _, rc := range inline {
		d.StaticRouteConfigs = append(d.StaticRouteConfigs, &adminv3.RoutesConfigDump_StaticRouteConfig{RouteConfig: mustAny(rc), LastUpdated: started})
	}
	for _, r := range s.dyn[xdsclient.RouteType].sorted() {
		d.DynamicRouteConfigs = append(d.DynamicRouteConfigs, &adminv3.RoutesConfigDump_DynamicRouteConfig{
			VersionInfo: r.version, RouteConfig: mustAny(r.msg), LastUpdated: ts(r.updated),
		})
	}
	return d
}

func inlineRoutes(l *listenerMsg) []proto.Message {
	var out []proto.Message
	chains := append(append([]*filterChainMsg(nil), l.GetFilterChains()...), l.GetDefaultFilterChain())
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			var h hcmv3.HttpConnectionManager
			if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&h) != nil {
				continue
			}
			if rc := h.GetRouteConfig(); rc != nil {
				out = append(out, proto.Clone(rc).(*routev3.RouteConfiguration))
			}
		}
	}
	return out
}
