package discovery

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// ztunnel's xDS, as istiod serves it: a node whose id starts "ztunnel~" is sent the
// mesh's WDS (istio.workload.Address) and L4 policies (istio.security.Authorization)
// over delta ADS, every resource to every ztunnel (a wildcard subscription: ztunnel's
// default), and never an Envoy type; sidecars are never sent these two. Every ztunnel
// shares one snapshot, made from the model by controlplane/xds, and it is made only once
// a ztunnel has connected: a lab without ambient pays nothing for it.
//
// go-control-plane's delta server does the protocol: a resource is sent when its version
// (a hash of its encoding, as istiod's, though not the same hash) differs from the one the ztunnel holds, a
// resource the snapshot no longer has is sent as removed, and a reconnecting ztunnel's
// initial_resource_versions spare it what it already holds. As istiod on a wildcard
// stream, resources carry no aliases.

// ztunnelPrefix starts a ztunnel's node id: ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local.
const ztunnelPrefix = "ztunnel~"

// IsZtunnel reports whether nodeID is a ztunnel's.
func IsZtunnel(nodeID string) bool { return strings.HasPrefix(nodeID, ztunnelPrefix) }

// ztunnelTypes are the types a ztunnel is served, in the order istiod registers them.
var ztunnelTypes = []string{xds.AddressType, xds.AuthorizationType}

// wdsSnapshot is the ztunnels' snapshot: per type, the resources by name and their
// versions. It implements go-control-plane's ResourceSnapshot, which the snapshot cache
// serves delta watches from; it is never modified once made.
type wdsSnapshot struct {
	types map[string]*wdsType
	// What the next build may keep (buildWDS): the model this one is of, and what each
	// pod's Workload was made of, by resource name.
	model *model.Model
	addrs *xds.AddressBuilder
	pods  map[string]builtPod
}

var _ cachev3.ResourceSnapshot = (*wdsSnapshot)(nil)

// wdsType is one type of the ztunnels' snapshot.
type wdsType struct {
	since    string // the update that last changed the type's resources (TypeStatus.Want)
	res      map[string]types.Resource
	versions map[string]string
	sum      [sha256.Size]byte // of the names and versions, to tell a change
}

func (s *wdsSnapshot) GetVersion(typeURL string) string {
	if t := s.types[typeURL]; t != nil {
		return t.since
	}
	return ""
}

func (s *wdsSnapshot) GetResources(typeURL string) map[string]types.Resource {
	if t := s.types[typeURL]; t != nil {
		return t.res
	}
	return nil
}

func (s *wdsSnapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	res := s.GetResources(typeURL)
	out := make(map[string]types.ResourceWithTTL, len(res))
	for name, r := range res {
		out[name] = types.ResourceWithTTL{Resource: r}
	}
	return out
}

// ConstructVersionMap does nothing: the versions are made with the snapshot.
func (s *wdsSnapshot) ConstructVersionMap() error { return nil }

func (s *wdsSnapshot) GetVersionMap(typeURL string) map[string]string {
	if t := s.types[typeURL]; t != nil {
		return t.versions
	}
	return nil
}

// buildWDS makes the ztunnels' snapshot of m for version, keeping prev's version of a
// type whose resources did not change; changed reports whether any did.
//
// An ambient pod's enrollment is a push of a model that differs from the last in that
// pod's annotation, one per pod as a lab comes up: making, encoding and hashing every
// address each time cost O(pods) per push, O(pods²) for a lab (37 ms a push at 1000
// pods, BenchmarkBuildWDS). When m differs from prev's model in its pods at most
// (xds.SameButPods) and has no waypoint, only the Workloads of pods that are not the same
// *model.Pod of the same health as in prev are made and encoded; the other pods'
// Workloads, the services and the authorizations are prev's, as istiod's WDS builds
// only what an event touched.
func buildWDS(m *model.Model, o xds.WDSOptions, prev *wdsSnapshot, version string) (snap *wdsSnapshot, changed bool, err error) {
	named := map[string]map[string]proto.Message{xds.AddressType: {}, xds.AuthorizationType: {}}
	known := map[string]map[string]string{} // by type, the versions kept from prev, by name
	reuse := prev != nil && prev.addrs != nil && prev.typ(xds.AddressType) != nil && prev.typ(xds.AuthorizationType) != nil &&
		len(m.Waypoints) == 0 && xds.SameButPods(prev.model, m)
	snap = &wdsSnapshot{types: map[string]*wdsType{}, model: m, pods: make(map[string]builtPod, len(m.Pods))}
	// Each pod's health is read once: the Workload is made with the health it is kept by.
	unhealthy := make(map[*model.Pod]bool, len(m.Pods))
	for _, p := range m.Pods {
		unhealthy[p] = o.Unhealthy != nil && o.Unhealthy(p)
	}
	if health := o.Unhealthy; health != nil {
		o.Unhealthy = func(p *model.Pod) bool {
			if u, ok := unhealthy[p]; ok {
				return u
			}
			return health(p)
		}
	}
	if reuse {
		b := prev.addrs.Next(m, o)
		snap.addrs = b
		prevAddrs := prev.typ(xds.AddressType)
		named[xds.AddressType] = make(map[string]proto.Message, len(prevAddrs.res)+1)
		kept := map[string]string{}
		for _, p := range m.Pods {
			name := b.PodName(p)
			built := builtPod{pod: p, unhealthy: unhealthy[p]}
			if was, ok := prev.pods[name]; ok && was == built {
				if r, ok := prevAddrs.res[name]; ok {
					named[xds.AddressType][name], kept[name] = r, prevAddrs.versions[name]
				}
				snap.pods[name] = built // a pod without an IP has no address, in both
				continue
			}
			if a := b.Pod(p); a != nil {
				named[xds.AddressType][name] = a
			}
			snap.pods[name] = built
		}
		for name, r := range prevAddrs.res { // the services and ServiceEntries' workloads
			if _, pod := prev.pods[name]; !pod {
				named[xds.AddressType][name], kept[name] = r, prevAddrs.versions[name]
			}
		}
		known[xds.AddressType] = kept
		known[xds.AuthorizationType] = prev.typ(xds.AuthorizationType).versions
		for name, r := range prev.typ(xds.AuthorizationType).res {
			named[xds.AuthorizationType][name] = r
		}
	} else {
		b := xds.NewAddressBuilder(m, o)
		snap.addrs = b
		for _, p := range m.Pods {
			snap.pods[b.PodName(p)] = builtPod{pod: p, unhealthy: unhealthy[p]}
			if a := b.Pod(p); a != nil {
				named[xds.AddressType][xds.AddressName(a)] = a
			}
		}
		for _, a := range b.Rest() {
			named[xds.AddressType][xds.AddressName(a)] = a
		}
		for _, a := range xds.Authorizations(m) {
			named[xds.AuthorizationType][xds.AuthorizationName(a)] = a
		}
	}
	for _, typ := range ztunnelTypes {
		t, tChanged, err := makeWDSType(typ, version, named[typ], known[typ], prev.typ(typ))
		if err != nil {
			return nil, false, err
		}
		changed = changed || tChanged
		snap.types[typ] = t
	}
	return snap, changed, nil
}

// builtPod is what a pod's Workload was made of: the pod and its health.
type builtPod struct {
	pod       *model.Pod
	unhealthy bool
}

// makeWDSType makes one type of a WDS snapshot for version from its resources by name,
// keeping prev when they did not change; changed reports whether they did. known holds
// the versions of resources kept as they were (not encoded again).
func makeWDSType(typ, version string, named map[string]proto.Message, known map[string]string, prev *wdsType) (t *wdsType, changed bool, err error) {
	t = &wdsType{since: version, res: make(map[string]types.Resource, len(named)), versions: make(map[string]string, len(named))}
	sum := sha256.New()
	for _, name := range sortedKeys(named) {
		v, ok := known[name]
		if !ok {
			// The version is go-control-plane's hash of the encoding, which it sends as
			// Resource.version and compares with what a proxy holds.
			b, err := cachev3.MarshalResource(named[name])
			if err != nil {
				return nil, false, fmt.Errorf("marshal %s %s: %w", typ, name, err)
			}
			v = cachev3.HashResource(b)
		}
		t.res[name], t.versions[name] = named[name], v
		sum.Write([]byte(name))
		sum.Write([]byte{0})
		sum.Write([]byte(v))
		sum.Write([]byte{0})
	}
	sum.Sum(t.sum[:0])
	if prev != nil && prev.sum == t.sum {
		return prev, false, nil
	}
	return t, true, nil
}

func (s *wdsSnapshot) typ(typeURL string) *wdsType {
	if s == nil {
		return nil
	}
	return s.types[typeURL]
}

// ztunnels is the server's ztunnel state: the last model, the snapshot made of it once a
// ztunnel connected, and the ztunnels it is set for.
type ztunnels struct {
	model   *model.Model
	version string // the update that gave model ("v" and n)
	n       uint64
	// taken is the highest version number a snapshot was made with. An update made while
	// no ztunnel is connected makes no snapshot and so leaves its number unused (Update
	// counts a version only when something was pushed under it), but the snapshot made
	// when the first ztunnel connects carries that update's number: the server's next
	// version must be above it (takenVersion), or the next change would go out under the
	// version the ztunnel has already ACKed, and a waiter for ztunnel's sync
	// (lab.WaitSynced) would see it synced before it was sent the change.
	taken uint64
	snap  *wdsSnapshot
	nodes map[string]bool
}

// updateZtunnels records m, of update number n, as the ztunnels' model and, when a
// ztunnel is known, pushes the snapshot made of it. It returns the number the snapshot
// carries, n unless a ztunnel that connected during this update took n for its first
// snapshot (made of the previous model), and whether the snapshot changed. s.mu is held.
func (s *Server) updateZtunnels(ctx context.Context, m *model.Model, n uint64) (uint64, bool, error) {
	s.ztMu.Lock()
	defer s.ztMu.Unlock()
	n = max(n, s.zt.taken+1)
	s.zt.model, s.zt.n, s.zt.version = m, n, "v"+strconv.FormatUint(n, 10)
	if len(s.zt.nodes) == 0 {
		s.zt.snap = nil // made again when a ztunnel connects
		return n, false, nil
	}
	changed, err := s.pushZtunnels(ctx)
	return n, changed, err
}

// takenVersion is the highest version number a ztunnel snapshot was made with.
func (s *Server) takenVersion() uint64 {
	s.ztMu.Lock()
	defer s.ztMu.Unlock()
	return s.zt.taken
}

// pushZtunnels makes the snapshot of the ztunnels' model and sets it for every ztunnel
// when it changed. s.ztMu is held.
func (s *Server) pushZtunnels(ctx context.Context) (bool, error) {
	if s.zt.model == nil {
		return false, nil
	}
	start := time.Now()
	snap, changed, err := buildWDS(s.zt.model, s.wds, s.zt.snap, s.zt.version)
	if err != nil {
		return false, fmt.Errorf("update ztunnel config %s: %w", s.zt.version, err)
	}
	if !changed {
		return false, nil
	}
	s.zt.snap = snap
	s.zt.taken = max(s.zt.taken, s.zt.n)
	for _, id := range sortedKeys(s.zt.nodes) {
		//nolint:staticcheck // QF1008: the embedded snapshot cache serves delta watches
		if err := s.cache.SnapshotCache.SetSnapshot(ctx, id, snap); err != nil {
			return true, fmt.Errorf("set ztunnel snapshot for %s: %w", id, err)
		}
	}
	s.log.Info("ztunnel config updated", "version", s.zt.version, "ztunnels", len(s.zt.nodes),
		"addresses", len(snap.types[xds.AddressType].res), "authorizations", len(snap.types[xds.AuthorizationType].res),
		"took", time.Since(start).Round(time.Microsecond))
	return true, nil
}

// ztunnelConnecting gives a ztunnel node the ztunnels' snapshot before its first watch,
// making the snapshot when it is the first ztunnel. The cache calls it for every delta
// watch of a ztunnel node.
func (s *Server) ztunnelConnecting(ctx context.Context, id string) {
	s.ztMu.Lock()
	defer s.ztMu.Unlock()
	if s.zt.nodes[id] {
		return
	}
	if s.zt.nodes == nil {
		s.zt.nodes = map[string]bool{}
	}
	s.zt.nodes[id] = true
	if s.zt.snap == nil {
		if _, err := s.pushZtunnels(ctx); err != nil {
			s.log.Error("ztunnel config", "node", id, "err", err)
		}
		return // pushZtunnels set it for every node, this one included
	}
	//nolint:staticcheck // QF1008: the embedded snapshot cache serves delta watches
	if err := s.cache.SnapshotCache.SetSnapshot(ctx, id, s.zt.snap); err != nil {
		s.log.Error("set ztunnel snapshot", "node", id, "err", err)
	}
}

// ztunnelNodes returns the ztunnels the server has served, and the version in which each
// of their types last changed.
func (s *Server) ztunnelNodes() ([]string, map[string]string) {
	s.ztMu.Lock()
	defer s.ztMu.Unlock()
	since := map[string]string{}
	if s.zt.snap != nil {
		for typ, t := range s.zt.snap.types {
			since[typ] = t.since
		}
	}
	return sortedKeys(s.zt.nodes), since
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// beforeDeltaWatch gives a ztunnel its snapshot before its first watch, and drops the
// watches a node is never answered: an Envoy type asked by a ztunnel, a ztunnel type
// asked by any other node.
func (s *Server) beforeDeltaWatch(node, typeURL string) bool {
	isZT := IsZtunnel(node)
	if isZT != slices.Contains(ztunnelTypes, typeURL) {
		s.log.Debug("delta watch not served", "node", node, "type", typeURL)
		return false
	}
	if isZT {
		s.ztunnelConnecting(s.ctx, node)
	}
	return true
}
