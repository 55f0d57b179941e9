package proxy

import (
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/listener"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// typeDump is what the last applied responses of one type delivered, for /config_dump.
type typeDump struct {
	version   string
	resources map[string]*dynResource
}

type dynResource struct {
	version string
	msg     proto.Message
	updated time.Time
}

var _ xdsclient.Handler = (*Server)(nil)

// Apply implements xdsclient.Handler: it validates every resource of a response and
// applies all of them, or none and returns the NACK reason.
func (s *Server) Apply(typeURL, version string, resources []*anypb.Any) error {
	switch typeURL {
	case xdsclient.ClusterType:
		return s.applyClusters(version, resources)
	case xdsclient.EndpointType:
		return s.applyEndpoints(version, resources)
	case xdsclient.ListenerType:
		return s.applyListeners(version, resources)
	case xdsclient.RouteType:
		return s.applyRoutes(version, resources)
	case xdsclient.SecretType:
		return s.applySecrets(version, resources)
	}
	return fmt.Errorf("unsupported resource type %s", typeURL)
}

func unpack[T proto.Message](a *anypb.Any, m T, kind string, i int) (T, error) {
	if err := a.UnmarshalTo(m); err != nil {
		return m, fmt.Errorf("%s[%d]: unpack: %w", kind, i, err)
	}
	return m, nil
}

func (s *Server) applyClusters(version string, resources []*anypb.Any) error {
	sc := s.stats.Named("cluster_manager.cds")
	sc.Counter("update_attempt").Inc()
	var cfgs []*cluster.Config
	msgs := map[string]proto.Message{}
	for i, a := range resources {
		c, err := unpack(a, &clusterv3.Cluster{}, "cluster", i)
		if err == nil {
			var cfg *cluster.Config
			if cfg, err = cluster.Compile(c); err == nil {
				if _, dup := msgs[cfg.Name]; dup {
					err = fmt.Errorf("cluster '%s': duplicate cluster name", cfg.Name)
				} else if s.clusters.IsStatic(cfg.Name) {
					err = fmt.Errorf("cluster '%s': a static cluster with this name exists", cfg.Name)
				}
				cfgs = append(cfgs, cfg)
				msgs[c.GetName()] = c
			}
		}
		if err != nil {
			sc.Counter("update_rejected").Inc()
			return err
		}
	}
	s.clusters.ApplyCDS(cfgs)
	sc.Counter("update_success").Inc()
	s.log.With("component", "upstream").Info(fmt.Sprintf("cds: %d cluster(s) at version %s", len(cfgs), version))
	s.mu.Lock()
	s.record(xdsclient.ClusterType, version, msgs, true)
	s.init.cdsDone = true
	s.checkInitLocked()
	s.mu.Unlock()
	s.xds.Subscribe(xdsclient.EndpointType, s.clusters.EDSNames())
	s.watchSecrets()
	return nil
}

func (s *Server) applyEndpoints(version string, resources []*anypb.Any) error {
	sc := s.stats.Named("cluster_manager.eds")
	sc.Counter("update_attempt").Inc()
	got := map[string][]cluster.Host{}
	msgs := map[string]proto.Message{}
	for i, a := range resources {
		la, err := unpack(a, &endpointv3.ClusterLoadAssignment{}, "cluster load assignment", i)
		if err == nil {
			var hosts []cluster.Host
			if hosts, err = cluster.CompileAssignment(la); err == nil {
				got[la.GetClusterName()] = hosts
				msgs[la.GetClusterName()] = la
			}
		}
		if err != nil {
			sc.Counter("update_rejected").Inc()
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// SotW for a named type: a resource missing from the response keeps its last value.
	wanted := s.xds.Names(xdsclient.EndpointType)
	all := map[string][]cluster.Host{}
	for _, name := range wanted {
		if hosts, ok := got[name]; ok {
			all[name] = hosts
		} else if old, ok := s.dyn[xdsclient.EndpointType].resourceMsg(name); ok {
			hosts, _ := cluster.HostsFromAssignment(old.(*endpointv3.ClusterLoadAssignment))
			all[name] = hosts
		}
	}
	s.clusters.ApplyEDS(all)
	sc.Counter("update_success").Inc()
	s.record(xdsclient.EndpointType, version, msgs, false)
	s.prune(xdsclient.EndpointType, wanted)
	s.init.edsDone = true
	s.checkInitLocked()
	return nil
}

func (s *Server) applyListeners(version string, resources []*anypb.Any) error {
	sc := s.stats.Named("listener_manager.lds")
	sc.Counter("update_attempt").Inc()
	var cfgs []*listener.Config
	msgs := map[string]proto.Message{}
	for i, a := range resources {
		l, err := unpack(a, &listenerv3.Listener{}, "listener", i)
		if err == nil {
			var cfg *listener.Config
			if cfg, err = listener.Compile(l); err == nil {
				if _, dup := msgs[cfg.Name]; dup {
					err = fmt.Errorf("listener '%s': duplicate listener name", cfg.Name)
				}
				cfgs = append(cfgs, cfg)
				msgs[l.GetName()] = l
			}
		}
		if err != nil {
			sc.Counter("update_rejected").Inc()
			return err
		}
	}
	if err := s.listeners.ApplyLDS(cfgs); err != nil {
		sc.Counter("update_rejected").Inc()
		return err
	}
	sc.Counter("update_success").Inc()
	s.log.With("component", "config").Info(fmt.Sprintf("lds: %d listener(s) at version %s", len(cfgs), version))
	s.mu.Lock()
	s.record(xdsclient.ListenerType, version, msgs, true)
	s.init.ldsDone = true
	s.mu.Unlock()
	s.xds.Subscribe(xdsclient.RouteType, s.rdsNames())
	s.watchSecrets()
	s.mu.Lock()
	s.checkInitLocked()
	s.mu.Unlock()
	return nil
}

// rdsNames returns the route configuration names the running listeners' HCMs use.
func (s *Server) rdsNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range s.listeners.Configs() {
		for _, fc := range append(append([]*listener.FilterChain(nil), l.Chains...), l.Default) {
			if fc != nil && fc.HTTP != nil && fc.HTTP.RDSName != "" && !seen[fc.HTTP.RDSName] {
				seen[fc.HTTP.RDSName] = true
				out = append(out, fc.HTTP.RDSName)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (s *Server) applyRoutes(version string, resources []*anypb.Any) error {
	sc := s.stats.Named("http_route_config.rds")
	sc.Counter("update_attempt").Inc()
	got := map[string]*httpconn.RouteTable{}
	msgs := map[string]proto.Message{}
	for i, a := range resources {
		rc, err := unpack(a, &routev3.RouteConfiguration{}, "route configuration", i)
		if err == nil {
			var t *httpconn.RouteTable
			if t, err = httpconn.CompileRoutes(rc); err == nil {
				got[rc.GetName()] = t
				msgs[rc.GetName()] = rc
			}
		}
		if err != nil {
			sc.Counter("update_rejected").Inc()
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wanted := s.xds.Names(xdsclient.RouteType)
	all := map[string]*httpconn.RouteTable{}
	for _, name := range wanted {
		if t, ok := got[name]; ok {
			all[name] = t
		} else if t, ok := s.routes.Get(name); ok {
			all[name] = t
		}
	}
	s.routes.Replace(all)
	sc.Counter("update_success").Inc()
	s.record(xdsclient.RouteType, version, msgs, false)
	s.prune(xdsclient.RouteType, wanted)
	s.init.rdsDone = true
	s.checkInitLocked()
	return nil
}

// record stores applied resources for /config_dump; a resource keeps the version and
// time of the response that last changed it. With sotw, resources absent are removed.
func (s *Server) record(typeURL, version string, msgs map[string]proto.Message, sotw bool) {
	td, ok := s.dyn[typeURL]
	if !ok {
		td = &typeDump{resources: map[string]*dynResource{}}
		s.dyn[typeURL] = td
	}
	td.version = version
	now := time.Now()
	for name, m := range msgs {
		if old, ok := td.resources[name]; ok && proto.Equal(old.msg, m) {
			continue
		}
		td.resources[name] = &dynResource{version: version, msg: m, updated: now}
	}
	if sotw {
		for name := range td.resources {
			if _, ok := msgs[name]; !ok {
				delete(td.resources, name)
			}
		}
	}
}

func (s *Server) prune(typeURL string, wanted []string) {
	td, ok := s.dyn[typeURL]
	if !ok {
		return
	}
	keep := map[string]bool{}
	for _, n := range wanted {
		keep[n] = true
	}
	for name := range td.resources {
		if !keep[name] {
			delete(td.resources, name)
		}
	}
}

func (td *typeDump) resourceMsg(name string) (proto.Message, bool) {
	if td == nil {
		return nil, false
	}
	r, ok := td.resources[name]
	if !ok {
		return nil, false
	}
	return r.msg, true
}

// sorted returns the resources sorted by name.
func (td *typeDump) sorted() []*namedResource {
	if td == nil {
		return nil
	}
	out := make([]*namedResource, 0, len(td.resources))
	for n, r := range td.resources {
		out = append(out, &namedResource{name: n, dynResource: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

type namedResource struct {
	name string
	*dynResource
}
