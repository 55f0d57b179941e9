package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// Update generates a snapshot for every injected pod of m under one new version
// ("v1", "v2", ...) and sets them, so connected proxies are pushed the new config at
// once; it removes the snapshots (and status) of proxies no longer in m. It generates
// and checks every snapshot before setting any, so an error leaves every proxy on its
// previous config. Updates are serialised.
func (s *Server) Update(ctx context.Context, m *model.Model) error {
	if m == nil {
		return errors.New("update xds: nil model")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	version := "v" + strconv.FormatUint(s.version+1, 10)

	snaps := map[string]*cachev3.Snapshot{}
	for _, pod := range m.Pods {
		if !pod.Sidecar.Inject {
			continue
		}
		res, err := xds.Generate(m, pod)
		if err != nil {
			return fmt.Errorf("update xds %s: %w", version, err)
		}
		snap, err := cachev3.NewSnapshot(version, res)
		if err != nil {
			return fmt.Errorf("update xds %s: snapshot for %s: %w", version, pod.NodeID(), err)
		}
		if err := snap.Consistent(); err != nil {
			return fmt.Errorf("update xds %s: snapshot for %s: %w", version, pod.NodeID(), err)
		}
		snaps[pod.NodeID()] = snap
	}

	s.version++ // even if setting fails below, "vN" never names two different configs
	for id, snap := range snaps {
		if err := s.cache.SetSnapshot(ctx, id, snap); err != nil {
			return fmt.Errorf("update xds %s: set snapshot for %s: %w", version, id, err)
		}
	}
	var gone []string
	for _, id := range s.nodes {
		if _, ok := snaps[id]; !ok {
			s.cache.ClearSnapshot(id)
			gone = append(gone, id)
		}
	}
	s.tracker.forget(gone)
	s.nodes = s.nodes[:0]
	for id := range snaps {
		s.nodes = append(s.nodes, id)
	}
	slices.Sort(s.nodes)
	s.log.Info("xds updated", "version", version, "proxies", len(snaps), "removed", len(gone))
	return nil
}

// Status reports every proxy with a snapshot or an ADS stream, sorted by node id.
func (s *Server) Status() []ProxyStatus {
	s.mu.Lock()
	known := slices.Clone(s.nodes)
	s.mu.Unlock()
	return s.tracker.status(known)
}
