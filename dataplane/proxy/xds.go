package proxy

import (
	"errors"
	"fmt"
	"slices"
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
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// typeDump is what the last applied responses of one type delivered, for /config_dump.
type typeDump struct {
	version   string
	resources map[string]*dynResource
	// failures are the refusals of the last LDS update that was not rejected whole.
	failures []failure
	failedAt time.Time
	// watches are the subscribed names of RDS or EDS in Envoy's watch order.
	watches []string
}

type dynResource struct {
	version string
	msg     proto.Message
	updated time.Time
}

var _ xdsclient.Handler = (*Server)(nil)

// Apply implements xdsclient.Handler: it applies a response and returns the NACK reason
// when any of it was refused. SDS responses apply whole or not at all; LDS and CDS
// responses apply resource by resource, and RDS and EDS responses subscription by
// subscription until one is refused, as Envoy.
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
	case xdsclient.WorkloadType:
		return applyWorkloads(resources)
	}
	return fmt.Errorf("unsupported resource type %s", typeURL)
}

func unpack[T proto.Message](a *anypb.Any, m T, kind string, i int) (T, error) {
	if err := a.UnmarshalTo(m); err != nil {
		return m, fmt.Errorf("%s[%d]: unpack: %w", kind, i, err)
	}
	return m, nil
}

// applyClusters applies a CDS response resource by resource, as Envoy's CdsApiHelper: a
// response whose resources do not decode or validate is rejected whole; otherwise each
// valid cluster is added or updated, each invalid one is refused (a running cluster of
// that name keeps its configuration), the dynamic clusters absent from the response are
// removed, and the refusals make the NACK "Error adding/updating cluster(s) <name>:
// <reason>, ...". The dump's version moves only when something changed.
func (s *Server) applyClusters(version string, resources []*anypb.Any) error {
	sc := s.stats.Named("cluster_manager.cds")
	sc.Counter("update_attempt").Inc()
	cs, err := decodeAll(resources, func() *clusterv3.Cluster { return &clusterv3.Cluster{} }, "cluster")
	if err != nil {
		sc.Counter("update_rejected").Inc()
		s.initAfterRejected(xdsclient.ClusterType)
		return err
	}
	s.mu.Lock()
	old := s.dyn[xdsclient.ClusterType]
	s.mu.Unlock()
	var cfgs []*cluster.Config
	msgs := map[string]proto.Message{}
	seen := map[string]bool{}
	var failed []failure
	for _, c := range cs {
		name := c.GetName()
		if seen[name] {
			failed = append(failed, failure{name: name, msg: c, err: fmt.Errorf("duplicate cluster %s found", name)})
			continue
		}
		seen[name] = true
		cfg, err := cluster.Compile(c)
		if err == nil && s.clusters.IsStatic(name) {
			err = fmt.Errorf("cluster '%s': a static cluster with this name exists", name)
		}
		if err != nil {
			failed = append(failed, failure{name: name, msg: c, err: err})
			if prev, ok := old.resourceMsg(name); ok {
				if pc, ok := s.clusters.Get(name); ok {
					cfgs = append(cfgs, pc.Config())
					msgs[name] = prev
				}
			}
			continue
		}
		cfgs = append(cfgs, cfg)
		msgs[name] = c
	}
	s.clusters.ApplyCDS(cfgs)
	s.log.With("component", "upstream").Info(fmt.Sprintf("cds: %d cluster(s) at version %s, %d rejected", len(cfgs), version, len(failed)))
	s.mu.Lock()
	s.record(xdsclient.ClusterType, version, msgs, true)
	s.init.cdsDone = true
	s.checkInitLocked()
	s.mu.Unlock()
	s.subscribe(xdsclient.EndpointType, s.clusters.EDSNames())
	s.watchSecrets()
	if len(failed) > 0 {
		sc.Counter("update_rejected").Inc()
		return cdsError(failed)
	}
	sc.Counter("update_success").Inc()
	return nil
}

// applyEndpoints applies an EDS response as Envoy's SotW gRPC mux and EdsClusterImpl (see
// applySubscribed). Envoy's /config_dump has no error state for endpoints, so none is kept.
func (s *Server) applyEndpoints(version string, resources []*anypb.Any) error {
	return applySubscribed(s, version, resources, subscribedType[*endpointv3.ClusterLoadAssignment, []cluster.Host]{
		typeURL:   xdsclient.EndpointType,
		kind:      "cluster load assignment",
		statScope: "cluster_manager.eds", // meshlab's count; Envoy's own counters are per cluster
		newMsg:    func() *endpointv3.ClusterLoadAssignment { return &endpointv3.ClusterLoadAssignment{} },
		name:      (*endpointv3.ClusterLoadAssignment).GetClusterName,
		current: func(name string) ([]cluster.Host, bool) {
			old, ok := s.dyn[xdsclient.EndpointType].resourceMsg(name)
			if !ok {
				return nil, false
			}
			hosts, _ := cluster.HostsFromAssignment(old.(*endpointv3.ClusterLoadAssignment))
			return hosts, true
		},
		compile: cluster.CompileAssignment,
		stats:   s.edsStats,
		replace: s.clusters.ApplyEDS,
		done:    func() { s.init.edsDone = true },
	})
}

// applyListeners applies an LDS response resource by resource, as Envoy's LdsApiImpl: a
// response whose resources do not decode or validate is rejected whole; otherwise each
// valid listener is added or updated, each invalid one (or one whose address cannot be
// bound) is refused and a running listener of that name keeps its configuration, the
// dynamic listeners absent from the response are removed, the refusals are kept for
// /config_dump's error_state, and the NACK is "Error adding/updating listener(s) <name>:
// <reason>\n...". The dump's version moves only when something changed.
func (s *Server) applyListeners(version string, resources []*anypb.Any) error {
	sc := s.stats.Named("listener_manager.lds")
	sc.Counter("update_attempt").Inc()
	ls, err := decodeAll(resources, func() *listenerv3.Listener { return &listenerv3.Listener{} }, "listener")
	if err != nil {
		sc.Counter("update_rejected").Inc()
		s.initAfterRejected(xdsclient.ListenerType)
		return err
	}
	s.mu.Lock()
	old := s.dyn[xdsclient.ListenerType]
	s.mu.Unlock()
	running := map[string]*listener.Config{}
	for _, c := range s.listeners.Configs() {
		running[c.Name] = c
	}
	var cfgs []*listener.Config
	msgs := map[string]proto.Message{}
	seen := map[string]bool{}
	var failed []failure
	// keepOld keeps the running configuration of a refused listener.
	keepOld := func(name string) {
		if prev, ok := old.resourceMsg(name); ok && running[name] != nil {
			cfgs = append(cfgs, running[name])
			msgs[name] = prev
		}
	}
	for _, l := range ls {
		name := l.GetName()
		if seen[name] {
			failed = append(failed, failure{name: name, msg: l, err: fmt.Errorf("duplicate listener %s found", name), dup: true})
			continue
		}
		seen[name] = true
		cfg, err := listener.Compile(l)
		if err != nil {
			failed = append(failed, failure{name: name, msg: l, err: err})
			keepOld(name)
			continue
		}
		cfgs = append(cfgs, cfg)
		msgs[name] = l
	}
	// A listener whose new address cannot be bound is refused on its own; the manager
	// changes nothing on that error, so the rest is applied again without it.
	for range len(cfgs) + 1 {
		err = s.listeners.ApplyLDS(cfgs)
		var be *listener.BindError
		if err == nil || !errors.As(err, &be) {
			break
		}
		failed = append(failed, failure{name: be.Listener, msg: msgs[be.Listener], err: err})
		cfgs = slices.DeleteFunc(cfgs, func(c *listener.Config) bool { return c.Name == be.Listener })
		delete(msgs, be.Listener)
		keepOld(be.Listener)
	}
	if err != nil {
		sc.Counter("update_rejected").Inc()
		return err
	}
	s.log.With("component", "config").Info(fmt.Sprintf("lds: %d listener(s) at version %s, %d rejected", len(cfgs), version, len(failed)))
	s.mu.Lock()
	s.record(xdsclient.ListenerType, version, msgs, true)
	s.dyn[xdsclient.ListenerType].setFailures(failed, time.Now())
	s.init.ldsDone = true
	s.mu.Unlock()
	s.subscribe(xdsclient.RouteType, s.rdsNames())
	s.watchSecrets()
	s.mu.Lock()
	s.checkInitLocked()
	s.mu.Unlock()
	if len(failed) > 0 {
		sc.Counter("update_rejected").Inc()
		return ldsError(failed)
	}
	sc.Counter("update_success").Inc()
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

// applyRoutes applies an RDS response as Envoy's SotW gRPC mux and its RDS subscriptions
// (see applySubscribed). Envoy's /config_dump has no error state for route
// configurations, so none is kept.
func (s *Server) applyRoutes(version string, resources []*anypb.Any) error {
	return applySubscribed(s, version, resources, subscribedType[*routev3.RouteConfiguration, *httpconn.RouteTable]{
		typeURL:   xdsclient.RouteType,
		kind:      "route configuration",
		statScope: "http_route_config.rds", // meshlab's count; Envoy's own counters are per subscription
		newMsg:    func() *routev3.RouteConfiguration { return &routev3.RouteConfiguration{} },
		name:      (*routev3.RouteConfiguration).GetName,
		decode: func(a *anypb.Any) (*routev3.RouteConfiguration, bool) {
			if a.GetTypeUrl() != xdsclient.RouteType {
				return nil, false
			}
			rc := s.routeCache.Decode(a.GetValue())
			return rc, rc != nil
		},
		current: s.routes.Get,
		compile: s.routeCache.Compile,
		stats:   s.rdsStats,
		replace: s.routes.Replace,
		retain:  s.routeCache.Retain,
		done:    func() { s.init.rdsDone = true },
	})
}

// subscribedType is what applySubscribed needs of a type whose resources are subscribed
// to by name (EDS, RDS): M is the resource message, C what it compiles to.
type subscribedType[M checked, C any] struct {
	typeURL, kind, statScope string
	newMsg                   func() M
	decode                   func(*anypb.Any) (M, bool) // optional: decodeAllNamed's fast
	name                     func(M) string
	current                  func(name string) (C, bool) // the applied configuration; s.mu held
	compile                  func(M) (C, error)
	stats                    func(name string) stats.Scope // per subscription
	replace                  func(map[string]C)            // installs every subscription's configuration
	retain                   func(subscribed []string)     // optional: forget what compile kept of the others
	done                     func()                        // marks the type initialised; s.mu held
}

// applySubscribed applies a response of a named type as Envoy's SotW gRPC mux: a response
// whose resources do not decode or validate is rejected whole; otherwise each subscription
// takes its own resource, newest subscription first (see watchOrderLocked), until one is
// refused (the exception ends Envoy's walk of the watches): the subscriptions already
// walked keep what they took, the refused one and the ones after it keep their last good
// configuration, and the NACK is the refusal alone. A subscription whose resource is not
// in the response keeps its own; a resource nobody subscribes to is ignored. A refusal
// reaches every subscription's onConfigUpdateFailed, which readies its init target as a
// good update does ("allow server startup to continue").
func applySubscribed[M checked, C any](s *Server, version string, resources []*anypb.Any, t subscribedType[M, C]) error {
	sc := s.stats.Named(t.statScope)
	sc.Counter("update_attempt").Inc()
	ms, err := decodeAllNamed(resources, t.newMsg, t.kind, t.name, t.decode)
	if err != nil {
		sc.Counter("update_rejected").Inc()
		for _, name := range s.xds.Names(t.typeURL) {
			countRejected(t.stats(name))
		}
		s.initAfterRejected(t.typeURL)
		return err
	}
	byName := firstByName(ms, t.name)
	s.mu.Lock()
	defer s.mu.Unlock()
	order := s.watchOrderLocked(t.typeURL)
	all := map[string]C{}
	for _, name := range order {
		if c, ok := t.current(name); ok {
			all[name] = c
		}
	}
	msgs := map[string]proto.Message{}
	var refused error
	for _, name := range order {
		m, ok := byName[name]
		if !ok {
			continue
		}
		c, err := t.compile(m)
		if err != nil {
			refused = err
			break
		}
		all[name] = c
		msgs[name] = m
		countApplied(t.stats(name))
	}
	if refused != nil {
		for _, name := range order {
			countRejected(t.stats(name))
		}
	}
	t.replace(all)
	s.record(t.typeURL, version, msgs, false)
	s.prune(t.typeURL, order)
	if t.retain != nil {
		t.retain(order)
	}
	t.done()
	s.checkInitLocked()
	if refused != nil {
		sc.Counter("update_rejected").Inc()
		return refused
	}
	sc.Counter("update_success").Inc()
	return nil
}

// watchOrderLocked returns the subscribed names of a named type (RDS, EDS) in the order
// Envoy's SotW gRPC mux walks its watches: a new watch puts itself at the front of the
// type's watch list (GrpcMuxWatchImpl::updateResources emplaces at begin()), so the
// newest subscription is applied first and an older one keeps its place. Names that
// became subscribed together are taken as created in name order (Envoy creates them in
// the order of the LDS or CDS response), so the last of them comes first. It records the
// order of what is subscribed now; s.mu is held.
func (s *Server) watchOrderLocked(typeURL string) []string {
	td := s.typeDumpLocked(typeURL)
	wanted := s.xds.Names(typeURL)
	keep := make(map[string]bool, len(wanted))
	for _, n := range wanted {
		keep[n] = true
	}
	order := slices.DeleteFunc(slices.Clone(td.watches), func(n string) bool { return !keep[n] })
	known := make(map[string]bool, len(order))
	for _, n := range order {
		known[n] = true
	}
	for _, n := range wanted {
		if !known[n] {
			order = slices.Insert(order, 0, n)
		}
	}
	td.watches = order
	return slices.Clone(order)
}

// subscribe sets the names of a named type and notes new subscriptions in the watch order.
func (s *Server) subscribe(typeURL string, names []string) {
	s.xds.Subscribe(typeURL, names)
	s.mu.Lock()
	s.watchOrderLocked(typeURL)
	s.mu.Unlock()
}

// record stores applied resources for /config_dump; a resource keeps the version and
// time of the response that last changed it. With sotw, resources absent are removed.
//
// For the wildcard SotW types (LDS, CDS) the type's version moves only when a resource
// was added, changed or removed, as Envoy's system_version_info ("any_applied"); for the
// named types it is the version of the last applied response.
func (s *Server) record(typeURL, version string, msgs map[string]proto.Message, sotw bool) {
	td := s.typeDumpLocked(typeURL)
	changed := false
	now := time.Now()
	for name, m := range msgs {
		if old, ok := td.resources[name]; ok && sameConfig(old.msg, m) {
			continue
		}
		td.resources[name] = &dynResource{version: version, msg: m, updated: now}
		changed = true
	}
	if sotw {
		for name := range td.resources {
			if _, ok := msgs[name]; !ok {
				delete(td.resources, name)
				changed = true
			}
		}
	}
	if changed || !sotw {
		td.version = version
	}
}

// typeDumpLocked returns the dump of typeURL, made when missing; s.mu is held.
func (s *Server) typeDumpLocked(typeURL string) *typeDump {
	td, ok := s.dyn[typeURL]
	if !ok {
		td = &typeDump{resources: map[string]*dynResource{}}
		s.dyn[typeURL] = td
	}
	return td
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
