package discovery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// Update generates the resources of every injected pod of m and pushes a new snapshot,
// under one new version ("v1", "v2", ...), to the proxies whose resources changed: the
// others keep their snapshot and version, as istiod pushes only to affected proxies. It
// removes the snapshots (and status) of proxies no longer in m. It generates and checks
// every snapshot before setting any, so an error leaves every proxy on its previous
// config. Updates are serialised.
func (s *Server) Update(ctx context.Context, m *model.Model) error {
	return s.UpdateFor(ctx, m, "update")
}

// UpdateFor is Update with what triggered it ("apply: VirtualService default/reviews"),
// which History shows beside each version it makes.
func (s *Server) UpdateFor(ctx context.Context, m *model.Model, trigger string) error {
	if m == nil {
		return errors.New("update xds: nil model")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	version := "v" + strconv.FormatUint(s.version+1, 10)
	snaps := map[string]*cachev3.Snapshot{}
	resByID := map[string]map[resource.Type][]types.Resource{}
	sums := map[string][sha256.Size]byte{}
	for _, pod := range m.Pods {
		if !pod.Sidecar.Inject {
			continue
		}
		id := pod.NodeID()
		res, err := xds.Generate(m, pod)
		if err != nil {
			return fmt.Errorf("update xds %s: %w", version, err)
		}
		if s.faults.nacked(id) {
			res = withNackListener(res)
		}
		resByID[id] = res
		sum, err := digest(res)
		if err != nil {
			return fmt.Errorf("update xds %s: %s: %w", version, id, err)
		}
		sums[id] = sum
		if prev, ok := s.sums[id]; ok && prev == sum {
			continue // unchanged: the proxy keeps its version
		}
		snap, err := cachev3.NewSnapshot(version, res)
		if err != nil {
			return fmt.Errorf("update xds %s: snapshot for %s: %w", version, id, err)
		}
		if err := snap.Consistent(); err != nil {
			return fmt.Errorf("update xds %s: snapshot for %s: %w", version, id, err)
		}
		snaps[id] = snap
	}
	if len(snaps) > 0 {
		s.version++ // even if setting fails below, "vN" never names two different configs
	}
	for id, snap := range snaps {
		if err := s.cache.SetSnapshot(ctx, id, snap); err != nil {
			delete(s.sums, id) // unknown state: the next update sets it again
			return fmt.Errorf("update xds %s: set snapshot for %s: %w", version, id, err)
		}
		if s.sums == nil {
			s.sums = map[string][sha256.Size]byte{}
		}
		s.sums[id] = sums[id]
		if s.wants == nil {
			s.wants = map[string]string{}
		}
		s.wants[id] = version
		s.history.add(id, version, trigger, resByID[id])
	}
	var gone []string
	for _, id := range s.nodes {
		if _, ok := sums[id]; !ok {
			s.cache.ClearSnapshot(id)
			delete(s.sums, id)
			delete(s.wants, id)
			gone = append(gone, id)
		}
	}
	s.tracker.forget(gone)
	s.history.forget(gone)
	s.nodes = s.nodes[:0]
	for id := range sums {
		s.nodes = append(s.nodes, id)
	}
	slices.Sort(s.nodes)
	s.model = m // for SetNack: the last model that was pushed
	s.log.Info("xds updated", "version", version, "proxies", len(sums), "pushed", len(snaps), "removed", len(gone), "trigger", trigger)
	return nil
}

// digest sums the deterministic encoding of every resource, by type in a fixed order.
func digest(res map[resource.Type][]types.Resource) ([sha256.Size]byte, error) {
	h := sha256.New()
	for _, typ := range slices.Sorted(maps.Keys(res)) {
		h.Write([]byte(typ))
		for _, r := range res[typ] {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
			if err != nil {
				return [sha256.Size]byte{}, fmt.Errorf("marshal %s %s: %w", typ, cachev3.GetResourceName(r), err)
			}
			h.Write([]byte(strconv.Itoa(len(b))))
			h.Write(b)
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out, nil
}

// Status reports every proxy with a snapshot or an ADS stream, sorted by node id.
func (s *Server) Status() []ProxyStatus {
	s.mu.Lock()
	known := slices.Clone(s.nodes)
	wants := maps.Clone(s.wants)
	s.mu.Unlock()
	out := s.tracker.status(known)
	for _, ps := range out {
		if want := wants[ps.NodeID]; want != "" {
			for typ, ts := range ps.Types {
				ts.Want = want
				ps.Types[typ] = ts
			}
		}
	}
	return out
}
