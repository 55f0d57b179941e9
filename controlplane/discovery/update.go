package discovery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// proxyState is what the server generated for one proxy last: the input of the next
// update's reuse and skip decisions.
type proxyState struct {
	nacked bool // its listeners carry the nack fault's
	// stale: an update could not generate this proxy's config, so it kept this state
	// while the server moved to a newer model; the next update generates every type.
	stale bool
	types map[resource.Type]typeState
}

// typeState is one resource type of a proxy's current snapshot.
type typeState struct {
	res   []types.Resource    // sorted by name, shared with the history: never modified
	names []string            // res's names
	anys  []*anypb.Any        // res encoded, as every SotW response carries them (sotwcache.go)
	keys  [][sha256.Size]byte // each resource's digest (of its type and encoding), which sum is of
	sum   [sha256.Size]byte
	since string // the version whose snapshot first had these resources: a delta proxy's Want
}

// Update generates the resources of every injected pod of m and pushes a new snapshot,
// under one new version ("v1", "v2", ...), to the proxies whose resources changed: the
// others keep their snapshot and version, as istiod pushes only to affected proxies. It
// removes the snapshots (and status) of proxies no longer in m. It generates and checks
// every snapshot before setting any. A proxy whose config cannot be generated (a push
// above the size limit, an inconsistent snapshot) keeps its previous config and gets
// the error, as istiod fails the push of that proxy only: it is logged, sent to
// OnEvent (EventPushError) and kept in its ProxyStatus.PushError until an update
// generates its config, and Update returns it in a *ProxyErrors once every other proxy
// has its new config. Updates are serialised.
func (s *Server) Update(ctx context.Context, m *model.Model) error {
	return s.UpdateFor(ctx, m, "update")
}

// UpdateFor is Update with what triggered it ("apply: VirtualService default/reviews"),
// which History shows beside each version it makes.
//
// The work is scoped as istiod's: only what the change can touch is generated again
// (xds.ChangeScope: a VirtualService change rebuilds routes, reusing every proxy's
// clusters and endpoints; an endpoint change rebuilds the clusters and load assignments
// of the Services the pod backs and keeps every other resource), on every core (a
// worker per CPU), and identical resources generated for several proxies are kept once,
// shared by their snapshots and the history.
func (s *Server) UpdateFor(ctx context.Context, m *model.Model, trigger string) error {
	if m == nil {
		return errors.New("update xds: nil model")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relay != nil {
		s.model = m // the upstream generates; the lab feeds it the model itself
		return nil
	}
	// Past any number a ztunnel's first snapshot took (ztunnels.taken): "vN" never names
	// two different configs.
	s.version = max(s.version, s.takenVersion())
	n := s.version + 1
	version := "v" + strconv.FormatUint(n, 10)
	scope := xds.ChangeScope(s.model, m)

	var pods []*model.Pod
	for _, pod := range m.Pods {
		if pod.Sidecar.Inject {
			pods = append(pods, pod)
		}
	}
	results := make([]genResult, len(pods))
	in := newInterner(m)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pods)) {
		wg.Go(func() {
			for i := range work {
				results[i] = s.generate(m, pods[i], scope, version, in)
			}
		})
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()

	seen := make(map[string]bool, len(pods))
	var pushed []genResult
	var failed *ProxyErrors
	for _, r := range results {
		seen[r.id] = true
		if r.err != nil {
			if failed == nil {
				failed = &ProxyErrors{Version: version, Proxies: len(pods), Errs: map[string]error{}}
			}
			failed.Errs[r.id] = r.err
			continue
		}
		if r.snap != nil {
			pushed = append(pushed, r)
		}
	}
	wlChanged, err := s.waypointWorkloadsFor(m, pods, version)
	if err != nil {
		return fmt.Errorf("update xds %s: %w", version, err)
	}
	if len(pushed) > 0 || wlChanged {
		s.version++ // even if setting fails below, "vN" never names two different configs
	}
	if s.proxies == nil {
		s.proxies = map[string]*proxyState{}
	}
	if s.wants == nil {
		s.wants = map[string]string{}
	}
	for _, r := range pushed {
		if err := s.cache.setSnapshot(ctx, r.id, s.withWorkloads(r.id, r.snap), encode(version, r.state)); err != nil {
			delete(s.proxies, r.id) // unknown state: the next update sets it again
			s.model = nil           // some proxies are on m already: the next update is not scoped
			return fmt.Errorf("update xds %s: set snapshot for %s: %w", version, r.id, err)
		}
		s.proxies[r.id] = r.state
		s.wants[r.id] = version
		since := make(map[string]string, len(r.state.types))
		for typ, ts := range r.state.types {
			since[typ] = ts.since
		}
		s.history.add(r.id, version, trigger, r.res, r.costs, since)
	}
	for _, r := range results {
		if r.err == nil && r.snap == nil {
			st := s.proxies[r.id]
			st.nacked, st.stale = r.state.nacked, false // generated again, and found unchanged
		}
	}
	s.recordFailures(failed, results)
	if wlChanged {
		if err := s.resetWaypoints(ctx, pushedIDs(pushed), seen); err != nil {
			return fmt.Errorf("update xds %s: waypoint workloads: %w", version, err)
		}
	}
	ztVersion, ztChanged, err := s.updateZtunnels(ctx, m, n)
	if ztChanged {
		s.version = max(s.version, ztVersion)
	}
	if err != nil {
		return err
	}
	var gone []string
	for _, id := range s.nodes {
		if !seen[id] {
			s.cache.ClearSnapshot(id)
			delete(s.proxies, id)
			delete(s.wants, id)
			delete(s.failed, id)
			gone = append(gone, id)
		}
	}
	s.tracker.forget(gone)
	s.history.forget(gone)
	s.nodes = slices.Sorted(maps.Keys(seen))
	s.model = m // for SetNack and the next update's scope: the last model that was pushed
	s.log.Info("xds updated", "version", version, "proxies", len(seen), "pushed", len(pushed), "removed", len(gone),
		"scope", scopeNames(scope.Types), "hosts", len(scope.Hosts), "pods", len(scope.Pods), "trigger", trigger)
	if failed != nil {
		return failed
	}
	return nil
}

// recordFailures keeps, for each proxy whose config the update could not generate
// (failed, nil when none), its error for Status, logs it and sends it to OnEvent, and
// marks the state it keeps stale (the server's model moves on without it). The errors
// of proxies generated this time are cleared. The caller holds s.mu.
func (s *Server) recordFailures(failed *ProxyErrors, results []genResult) {
	for _, r := range results {
		if r.err == nil {
			delete(s.failed, r.id)
		}
	}
	if failed == nil {
		return
	}
	if s.failed == nil {
		s.failed = map[string]string{}
	}
	for _, id := range slices.Sorted(maps.Keys(failed.Errs)) {
		err := failed.Errs[id]
		s.failed[id] = err.Error()
		if prev := s.proxies[id]; prev != nil {
			prev.stale = true
		}
		s.log.Warn("proxy config not generated: it keeps its previous config", "node", id, "version", failed.Version, "err", err)
		s.tracker.pushFailed(id, failed.Version, err)
	}
}

// PushError is why the last update could not generate node's config, "" when it could
// (its ProxyStatus.PushError, without building every proxy's status).
func (s *Server) PushError(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[node]
}

// ProxyErrors is an update's error when the config of some proxies could not be
// generated. Each of them kept its previous config; every other proxy was given its new
// one. errors.As finds each proxy's error (a *PushTooLargeError, say).
type ProxyErrors struct {
	Version string           // the version the update made
	Proxies int              // the proxies the update generated config for
	Errs    map[string]error // by node id
}

func (e *ProxyErrors) Error() string {
	ids := slices.Sorted(maps.Keys(e.Errs))
	var b strings.Builder
	fmt.Fprintf(&b, "update xds %s: config of %d of %d proxies not generated (each keeps its previous config, the others have the new one): ",
		e.Version, len(ids), e.Proxies)
	const shown = 3
	for i, id := range ids[:min(len(ids), shown)] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", id, e.Errs[id])
	}
	if len(ids) > shown {
		fmt.Fprintf(&b, "; and %d more", len(ids)-shown)
	}
	return b.String()
}

// Unwrap returns each proxy's error, in node id order.
func (e *ProxyErrors) Unwrap() []error {
	out := make([]error, 0, len(e.Errs))
	for _, id := range slices.Sorted(maps.Keys(e.Errs)) {
		out = append(out, e.Errs[id])
	}
	return out
}

// genResult is one proxy's part of an update: a snapshot to set (nil when its
// resources did not change) and the state to keep.
type genResult struct {
	id    string
	snap  *cachev3.Snapshot
	res   map[resource.Type][]types.Resource
	state *proxyState
	costs map[resource.Type]int // by type, encoded bytes of the resources first kept by this snapshot
	err   error
}

// generate builds one proxy's snapshot for version: the types in scope generated again
// (every type for a new proxy, one the scope names, or one whose nack fault changed),
// the scope's hosts replaced in its clusters and endpoints, the rest reused from its last
// snapshot.
func (s *Server) generate(m *model.Model, pod *model.Pod, scope xds.Scope, version string, in *interner) genResult {
	id := pod.NodeID()
	r := genResult{id: id}
	prev := s.proxies[id] // read-only while s.mu is held by UpdateFor
	nacked := s.faults.nacked(id)
	typs := scope.Types
	var byHost []resource.Type // types whose scope.Hosts are replaced
	// A waypoint's resources are all its services' (xds/waypoint.go): any change the
	// scope names may touch each of its types, so they are made again every time.
	if prev == nil || prev.stale || prev.nacked != nacked || scope.Pods[id] || pod.Waypoint {
		typs = xds.GeneratedTypes
	} else if len(scope.Hosts) > 0 {
		for _, typ := range []resource.Type{resource.ClusterType, resource.EndpointType} {
			if !slices.Contains(typs, typ) {
				byHost = append(byHost, typ)
			}
		}
	}
	r.state = &proxyState{nacked: nacked, types: map[resource.Type]typeState{}}
	if prev != nil {
		maps.Copy(r.state.types, prev.types)
	}
	if len(typs) == 0 && len(byHost) == 0 {
		return r
	}
	// Types pods share by xds.SharedKey are built once per key; the others for this pod.
	// Each is checked against the push size limit when built (types not generated
	// again were checked when they were).
	var own []resource.Type
	built := make(map[resource.Type]typeState, len(typs))
	costs := map[resource.Type]int{}
	for _, typ := range byHost {
		ts, cost, err := s.replaceHosts(m, pod, typ, prev.types[typ], scope.Hosts, in)
		if err != nil {
			r.err = err
			return r
		}
		built[typ], costs[typ] = ts, cost
	}
	for _, typ := range typs {
		key, ok := xds.SharedKey(m, typ, pod)
		if !ok || (nacked && typ == resource.ListenerType) {
			own = append(own, typ)
			continue
		}
		e, first := in.shared(typ, key)
		e.once.Do(func() {
			res, err := xds.GenerateShared(m, pod, in.xds, typ)
			if err != nil {
				e.err = err
				return
			}
			e.ts, e.cost, e.err = in.intern(typ, res[typ])
			if e.err == nil {
				e.err = s.checkTypeSize(id, typ, e.ts)
			}
		})
		if e.err != nil {
			r.err = e.err
			return r
		}
		built[typ] = e.ts
		if first {
			costs[typ] = e.cost
		}
	}
	if len(own) > 0 {
		res, err := xds.GenerateShared(m, pod, in.xds, own...)
		if err != nil {
			r.err = err
			return r
		}
		if nacked && res[resource.ListenerType] != nil {
			res = withNackListener(res)
		}
		for _, typ := range own {
			ts, cost, err := in.intern(typ, res[typ])
			if err != nil {
				r.err = err
				return r
			}
			if err := s.checkTypeSize(id, typ, ts); err != nil {
				r.err = err
				return r
			}
			built[typ], costs[typ] = ts, cost
		}
	}
	changed := prev == nil
	for _, typ := range append(slices.Clone(typs), byHost...) {
		ts, cost := built[typ], costs[typ]
		if old, ok := r.state.types[typ]; !ok || old.sum != ts.sum {
			changed = true
			ts.since = version
			r.state.types[typ] = ts
			if r.costs == nil {
				r.costs = map[resource.Type]int{}
			}
			r.costs[typ] = cost
		}
	}
	if !changed {
		return r
	}
	r.res = make(map[resource.Type][]types.Resource, len(r.state.types))
	for typ, ts := range r.state.types {
		r.res[typ] = ts.res
	}
	snap, err := cachev3.NewSnapshot(version, r.res)
	// Consistency cannot be checked of a proxyless pod's snapshot: its route
	// configurations are named by api_listeners, which go-control-plane does not read
	// (xds/grpc.go keeps them consistent, tested there).
	if err == nil && !pod.Sidecar.GRPCAgent {
		err = consistent(prev, r.state, version)
	}
	if err != nil {
		r.err = fmt.Errorf("snapshot: %w", err)
		return r
	}
	r.snap = snap
	return r
}

// consistent is go-control-plane's Snapshot.Consistent for cur (every load assignment
// and route configuration its clusters and listeners name, and only those), checking
// each pair only when it may differ from prev's, which was checked: Consistent decodes
// every listener's connection managers, which an endpoint or route change leaves as
// they were.
func consistent(prev, cur *proxyState, version string) error {
	for _, pair := range [][2]resource.Type{{resource.ClusterType, resource.EndpointType}, {resource.ListenerType, resource.RouteType}} {
		from, to := pair[0], pair[1]
		if prev != nil && prev.types[from].sum == cur.types[from].sum && slices.Equal(prev.types[to].names, cur.types[to].names) {
			continue
		}
		if from == resource.ClusterType {
			if checked, err := clustersConsistent(cur.types[from], cur.types[to]); checked {
				if err != nil {
					return err
				}
				continue
			}
		}
		snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{from: cur.types[from].res, to: cur.types[to].res})
		if err == nil {
			err = snap.Consistent()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// clustersConsistent is Snapshot.Consistent of clusters and load assignments (sorted
// by name): the load assignments the EDS clusters name (by their EDS service name,
// else their own) are exactly those there are. It reads the clusters' fields where
// Consistent builds maps of both types for every proxy (a new Service changes every
// proxy's clusters). checked is false when a resource is not a Cluster; the caller then
// asks Consistent.
func clustersConsistent(clusters, endpoints typeState) (checked bool, err error) {
	named := make([]bool, len(endpoints.names))
	distinct := 0
	for _, r := range clusters.res {
		c, isCluster := r.(*cluster.Cluster)
		if !isCluster {
			return false, nil
		}
		if c.GetType() != cluster.Cluster_EDS {
			continue
		}
		name := c.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = c.GetName()
		}
		i, found := slices.BinarySearch(endpoints.names, name)
		if !found {
			return true, fmt.Errorf("inconsistent %q reference: cluster %s names load assignment %s, which does not exist",
				resource.EndpointType, c.GetName(), name)
		}
		if !named[i] {
			named[i] = true
			distinct++
		}
	}
	if distinct != len(endpoints.names) {
		return true, fmt.Errorf("mismatched %q reference and resource lengths: clusters name %d load assignments, there are %d",
			resource.EndpointType, distinct, len(endpoints.names))
	}
	return true, nil
}

// replaceHosts returns typ's state for pod with the resources of hosts generated again
// (xds.GenerateHosts) and the others kept from prev, and the encoded bytes of the
// resources first kept. A type pods share by xds.SharedKey is replaced once per key:
// every pod of a key had the same resources of the last model.
func (s *Server) replaceHosts(m *model.Model, pod *model.Pod, typ resource.Type, prev typeState, hosts map[string]bool, in *interner) (typeState, int, error) {
	build := func() (typeState, int, error) {
		add, err := xds.GenerateHosts(m, pod, in.xds, typ, hosts)
		if err != nil {
			return typeState{}, 0, err
		}
		fresh, cost, err := in.intern(typ, add)
		if err != nil {
			return typeState{}, 0, err
		}
		ts := mergeHosts(typ, prev, fresh, hosts)
		return ts, cost, s.checkTypeSize(pod.NodeID(), typ, ts)
	}
	key, ok := xds.SharedKey(m, typ, pod)
	if !ok {
		return build()
	}
	e, first := in.shared(typ, "\x00hosts\x00"+key)
	e.once.Do(func() { e.ts, e.cost, e.err = build() })
	if !first {
		return e.ts, 0, e.err
	}
	return e.ts, e.cost, e.err
}

// mergeHosts returns prev without its resources of hosts (by xds.ResourceHost), with
// fresh's, sorted by name; both are sorted by name.
func mergeHosts(typ resource.Type, prev, fresh typeState, hosts map[string]bool) typeState {
	if sameHostResources(prev, fresh, hosts) {
		return prev // the hosts' resources came out as they were: keep prev whole
	}
	n := len(prev.names) + len(fresh.names)
	ts := typeState{res: make([]types.Resource, 0, n), names: make([]string, 0, n), anys: make([]*anypb.Any, 0, n),
		keys: make([][sha256.Size]byte, 0, n)}
	take := func(from typeState, i int) {
		ts.res = append(ts.res, from.res[i])
		ts.names = append(ts.names, from.names[i])
		ts.anys = append(ts.anys, from.anys[i])
		ts.keys = append(ts.keys, from.keys[i])
	}
	i, j := 0, 0
	for i < len(prev.names) || j < len(fresh.names) {
		if i < len(prev.names) && hosts[xds.ResourceHost(prev.names[i])] {
			i++
			continue
		}
		if j == len(fresh.names) || (i < len(prev.names) && prev.names[i] < fresh.names[j]) {
			take(prev, i)
			i++
			continue
		}
		take(fresh, j)
		j++
	}
	sums := sha256.New()
	sums.Write([]byte(typ))
	for _, k := range ts.keys {
		sums.Write(k[:])
	}
	sums.Sum(ts.sum[:0])
	return ts
}

// sameHostResources reports whether prev's resources of hosts are fresh's, by name and
// digest, in order.
func sameHostResources(prev, fresh typeState, hosts map[string]bool) bool {
	j := 0
	for i, name := range prev.names {
		if !hosts[xds.ResourceHost(name)] {
			continue
		}
		if j == len(fresh.names) || fresh.names[j] != name || fresh.keys[j] != prev.keys[i] {
			return false
		}
		j++
	}
	return j == len(fresh.names)
}

// checkTypeSize refuses, as checkPushSize (limits.go) does, a type whose push would
// exceed the server's limit; it sums the encodings the interner made instead of sizing
// every resource again, and leaves the refusal's details to checkPushSize.
func (s *Server) checkTypeSize(id string, typ resource.Type, ts typeState) error {
	total := perMessageOverhead
	for _, a := range ts.anys {
		total += len(a.GetValue()) + perResourceOverhead
	}
	if total <= s.maxPush {
		return nil
	}
	return checkPushSize(id, map[resource.Type][]types.Resource{typ: ts.res}, s.maxPush)
}

// interner keeps one copy of each distinct resource generated during one update, so
// that proxies with identical clusters, routes or endpoints share them, and the types
// built once for every pod of an xds.SharedKey. Safe for concurrent use.
type interner struct {
	xds    *xds.Shared // the outbound clusters, built once per namespace
	mu     sync.Mutex
	res    map[[sha256.Size]byte]interned
	byPtr  map[types.Resource][sha256.Size]byte // resources generated once for many pods: encoded once
	shares map[sharedID]*sharedType
}

// sharedID names one type built for every pod of one xds.SharedKey.
type sharedID struct {
	typ resource.Type
	key string
}

// sharedType is a type built once for the pods of a key, by the first pod that needs it.
type sharedType struct {
	once sync.Once
	ts   typeState
	cost int
	err  error
}

// shared returns the entry of (typ, key), and whether this call made it (the caller then
// counts its cost).
func (in *interner) shared(typ resource.Type, key string) (*sharedType, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	id := sharedID{typ, key}
	if e, ok := in.shares[id]; ok {
		return e, false
	}
	e := &sharedType{}
	in.shares[id] = e
	return e, true
}

// interned is a resource kept once, and its encoding.
type interned struct {
	res types.Resource
	any *anypb.Any
}

func newInterner(m *model.Model) *interner {
	return &interner{xds: xds.NewShared(m), res: map[[sha256.Size]byte]interned{},
		byPtr: map[types.Resource][sha256.Size]byte{}, shares: map[sharedID]*sharedType{}}
}

// intern digests rs (by the deterministic encoding of each resource, as go-control-plane
// encodes them) and replaces each resource by the copy already kept, if any. It returns
// the type's state, sorted by name, and the encoded bytes of the resources kept for the
// first time.
func (in *interner) intern(typ resource.Type, rs []types.Resource) (typeState, int, error) {
	ts := typeState{res: make([]types.Resource, len(rs)), names: make([]string, len(rs)), anys: make([]*anypb.Any, len(rs)),
		keys: make([][sha256.Size]byte, len(rs))}
	order := make([]int, len(rs))
	for i, r := range rs {
		ts.names[i] = cachev3.GetResourceName(r)
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(ts.names[a], ts.names[b]) })
	sums := sha256.New()
	sums.Write([]byte(typ))
	cost := 0
	names := make([]string, len(rs))
	for i, j := range order {
		r := rs[j]
		names[i] = ts.names[j]
		in.mu.Lock()
		key, seen := in.byPtr[r]
		in.mu.Unlock()
		if seen { // the same object, generated once for many pods
			sums.Write(key[:])
			in.mu.Lock()
			kept := in.res[key]
			in.mu.Unlock()
			ts.res[i], ts.anys[i], ts.keys[i] = kept.res, kept.any, key
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			return typeState{}, 0, fmt.Errorf("marshal %s %s: %w", typ, names[i], err)
		}
		h := sha256.New()
		h.Write([]byte(typ))
		h.Write(b)
		h.Sum(key[:0])
		sums.Write(key[:])
		in.mu.Lock()
		kept, ok := in.res[key]
		if !ok {
			kept = interned{res: r, any: &anypb.Any{TypeUrl: typ, Value: b}}
			in.res[key] = kept
			cost += len(b)
		}
		in.byPtr[r] = key
		in.mu.Unlock()
		ts.res[i], ts.anys[i], ts.keys[i] = kept.res, kept.any, key
	}
	ts.names = names
	sums.Sum(ts.sum[:0])
	return ts, cost, nil
}

// scopeNames is the short names of the types in scope, for the log.
func scopeNames(scope []resource.Type) []string {
	out := make([]string, 0, len(scope))
	for _, t := range scope {
		out = append(out, t[len("type.googleapis.com/envoy.config."):])
	}
	return out
}

// Status reports every proxy with a snapshot or an ADS stream, sorted by node id.
func (s *Server) Status() []ProxyStatus {
	s.mu.Lock()
	known := slices.Clone(s.nodes)
	s.mu.Unlock()
	zts, ztSince := s.ztunnelNodes()
	known = append(known, zts...)
	out := s.tracker.status(known)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ps := range out {
		out[i].PushError = s.failed[ps.NodeID]
		for typ, ts := range ps.Types {
			ts.Want = s.wantLocked(ps.NodeID, typ, ztSince)
			ps.Types[typ] = ts
		}
	}
	return out
}

// wantLocked is the version of typ that node is to be sent: the version in which its
// resources last changed (pushed only when they change, SotW and delta alike), "" when
// the server has no config for node. The caller holds s.mu; ztSince is ztunnelNodes'.
func (s *Server) wantLocked(node, typ string, ztSince map[string]string) string {
	if IsZtunnel(node) {
		return ztSince[typ]
	}
	want := s.wants[node]
	if want == "" {
		return ""
	}
	if typ == WorkloadType && s.wp.workloads != nil {
		// A waypoint's workloads are sent when they change, not with its own resources
		// (waypoint_wds.go).
		return s.wp.workloads.since
	}
	if st := s.proxies[node]; st != nil {
		if t, ok := st.types[typ]; ok {
			return t.since
		}
	}
	return want
}
