package discovery

import (
	"context"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// A waypoint's Envoy also subscribes, over its delta ADS stream, to the mesh's workloads
// (istio.workload.Workload, every workload: a wildcard), which istio-proxy's metadata
// discovery indexes by address for the peer_metadata filters' workload_discovery: the
// waypoint's request metrics name their client and destination workloads from it. As
// istiod's WorkloadGenerator, the workloads are WDS's (xds.Addresses), named by uid.
// The type joins each waypoint's snapshot, and a change of the workloads alone sets
// every waypoint's snapshot again.

// WorkloadType is the type URL of the workloads a waypoint is served.
const WorkloadType = "type.googleapis.com/istio.workload.Workload"

const waypointPrefix = "waypoint~"

// waypointWDS is the server's waypoint state: the workloads type last made, and the
// Envoy snapshot last set for each waypoint node. Guarded by Server.mu.
type waypointWDS struct {
	workloads *wdsType
	envoy     map[string]*cachev3.Snapshot
}

// waypointSnapshot is a waypoint's snapshot: its Envoy resources and the workloads.
type waypointSnapshot struct {
	*cachev3.Snapshot
	workloads *wdsType
}

var _ cachev3.ResourceSnapshot = (*waypointSnapshot)(nil)

func (s *waypointSnapshot) GetVersion(typeURL string) string {
	if typeURL == WorkloadType {
		return s.workloads.since
	}
	return s.Snapshot.GetVersion(typeURL)
}

func (s *waypointSnapshot) GetResources(typeURL string) map[string]types.Resource {
	if typeURL == WorkloadType {
		return s.workloads.res
	}
	return s.Snapshot.GetResources(typeURL)
}

func (s *waypointSnapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	if typeURL != WorkloadType {
		return s.Snapshot.GetResourcesAndTTL(typeURL)
	}
	out := make(map[string]types.ResourceWithTTL, len(s.workloads.res))
	for name, r := range s.workloads.res {
		out[name] = types.ResourceWithTTL{Resource: r}
	}
	return out
}

func (s *waypointSnapshot) GetVersionMap(typeURL string) map[string]string {
	if typeURL == WorkloadType {
		return s.workloads.versions
	}
	return s.Snapshot.GetVersionMap(typeURL)
}

// waypointWorkloadsFor makes the workloads type of m for version when pods has a
// waypoint (a lab without one pays nothing for it), keeping the last one when they did
// not change; it reports whether they did. s.mu is held.
func (s *Server) waypointWorkloadsFor(m *model.Model, pods []*model.Pod, version string) (bool, error) {
	if !slices.ContainsFunc(pods, func(p *model.Pod) bool { return p.Waypoint }) {
		s.wp.workloads = nil
		return false, nil
	}
	named := map[string]proto.Message{}
	for _, a := range xds.Addresses(m, s.wds) {
		if w := a.GetWorkload(); w != nil {
			named[w.GetUid()] = w
		}
	}
	t, changed, err := makeWDSType(WorkloadType, version, named, nil, s.wp.workloads)
	if err != nil {
		return false, err
	}
	s.wp.workloads = t
	return changed, nil
}

// pushedIDs returns the nodes of pushed.
func pushedIDs(pushed []genResult) map[string]bool {
	out := make(map[string]bool, len(pushed))
	for _, r := range pushed {
		out[r.id] = true
	}
	return out
}

// withWorkloads returns the snapshot to set for node: a waypoint's with the workloads
// (and remembered, for a change of the workloads alone), any other node's as it is.
// s.mu is held.
func (s *Server) withWorkloads(node string, snap *cachev3.Snapshot) cachev3.ResourceSnapshot {
	if !strings.HasPrefix(node, waypointPrefix) || s.wp.workloads == nil {
		return snap
	}
	if s.wp.envoy == nil {
		s.wp.envoy = map[string]*cachev3.Snapshot{}
	}
	s.wp.envoy[node] = snap
	return &waypointSnapshot{Snapshot: snap, workloads: s.wp.workloads}
}

// resetWaypoints sets again the snapshot of every waypoint not in pushed, with the
// workloads that changed, and forgets the waypoints that are gone. s.mu is held.
func (s *Server) resetWaypoints(ctx context.Context, pushed, seen map[string]bool) error {
	for _, node := range sortedKeys(s.wp.envoy) {
		if !seen[node] {
			delete(s.wp.envoy, node)
			continue
		}
		if pushed[node] {
			continue
		}
		//nolint:staticcheck // QF1008: the embedded snapshot cache serves delta watches
		if err := s.cache.SnapshotCache.SetSnapshot(ctx, node, &waypointSnapshot{Snapshot: s.wp.envoy[node], workloads: s.wp.workloads}); err != nil {
			return err
		}
	}
	return nil
}
