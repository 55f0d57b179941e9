package lab

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/dataplane/rqtotals"
	"github.com/meshlab/meshlab/web"
)

var _ web.Backend = (*Lab)(nil)

// Info implements web.LabReader.
func (l *Lab) Info() api.LabInfo {
	info := api.LabInfo{
		Name: l.rec.Name, PID: l.rec.PID, Scenario: l.rec.Scenario, PodCIDR: l.rec.PodCIDR,
		ServiceCIDR: l.rec.ServiceCIDR, XDSAddr: l.rec.XDSAddr, Created: l.rec.Created,
	}
	controlPlaneInfo(l, &info) // istiod.go
	return info
}

// Pods implements web.PodLister: the model's pods, each sidecar's status from what
// the lab holds of it or from its agent (lab/podview).
func (l *Lab) Pods(ctx context.Context) ([]api.PodStatus, error) {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	out := make([]api.PodStatus, len(m.Pods))
	for i, p := range m.Pods {
		out[i] = api.PodStatus{Name: p.Name, Namespace: p.Namespace, Key: p.Key(), NetNS: NamespaceName(l.opts.Name, p.Key()), IP: p.IP, Sidecar: p.Sidecar.Inject, Epoch: -1}
		if !p.Sidecar.Inject {
			out[i].Ready = true
		}
	}
	l.podview.Fill(ctx, podAgents{l}, out)
	if z := ztunnelPod(l); z != nil { // ztunnel.go: istio-system's ztunnel-<x>, as kubectl lists it
		out = append(out, ztunnelStatus(l, z))
	}
	return out, nil
}

// podAgents is lab/podview's Deps: the pods' agents and request totals, by pod key.
type podAgents struct{ l *Lab }

func (a podAgents) AgentStatus(ctx context.Context, key string) (agentapi.Status, error) {
	c := a.l.agentClient(key)
	defer c.Close()
	return c.Status(ctx)
}

func (a podAgents) AgentUsedStats(ctx context.Context, key, filter string) (map[string]uint64, error) {
	c := a.l.agentClient(key)
	defer c.Close()
	st, err := c.UsedStats(ctx, filter)
	return st.Values, err
}

func (a podAgents) RequestTotals(key string) (out, in uint64, err error) {
	return rqtotals.Read(filepath.Join(a.l.paths.PodDir(key), rqtotals.File))
}

// NameTable implements web.NameTableSource.
func (l *Lab) NameTable(ctx context.Context, pod string, version uint64) (api.NameTable, error) {
	return l.names.get(ctx, pod, version)
}

// nameTables versions the model's DNS names; agents long-poll it.
type nameTables struct {
	mu      sync.Mutex
	model   *model.Model
	version uint64
	changed chan struct{}           // closed and replaced on every update
	world   map[string][]netip.Addr // the outside world's names (world.go)
}

// setWorld makes every table also answer the outside world's names.
func (t *nameTables) setWorld(names map[string][]netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.world = names
}

func newNameTables(m *model.Model) *nameTables {
	return &nameTables{model: m, version: 1, changed: make(chan struct{})}
}

// update makes the tables m's. It wakes the agents' long polls only when a pod's table
// changed, or a pod came or went: an apply that changes routing alone (a
// VirtualService, a DestinationRule) would otherwise send every agent its unchanged
// table in the middle of the push it causes.
func (t *nameTables) update(m *model.Model) {
	t.mu.Lock()
	defer t.mu.Unlock()
	same := sameNameTables(t.model, m)
	t.model = m
	if same {
		return
	}
	t.version++
	close(t.changed)
	t.changed = make(chan struct{})
}

// sameNameTables reports whether a and b have the same pods and give each the same
// name table.
func sameNameTables(a, b *model.Model) bool {
	if a == nil || b == nil || len(a.Pods) != len(b.Pods) {
		return false
	}
	namespaces := map[string]bool{}
	for _, p := range b.Pods {
		if a.Pod(p.Key()) == nil {
			return false
		}
		namespaces[p.Namespace] = true
	}
	for ns := range namespaces {
		if !maps.EqualFunc(a.NameTable(ns), b.NameTable(ns), slices.Equal) || !maps.Equal(a.Aliases(ns), b.Aliases(ns)) {
			return false
		}
	}
	return true
}

func (t *nameTables) get(ctx context.Context, pod string, version uint64) (api.NameTable, error) {
	for {
		t.mu.Lock()
		m, v, changed, world := t.model, t.version, t.changed, t.world
		t.mu.Unlock()
		p := m.Pod(pod)
		if p == nil {
			return api.NameTable{}, api.ErrUnknownPod
		}
		if v != version {
			return api.NameTable{Version: v, Names: podNameTable(m, p.Namespace, world)}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return api.NameTable{Version: v, Names: podNameTable(m, p.Namespace, world)}, nil
		}
	}
}

// podNameTable is the name table of a pod of namespace ns: the model's names, the outside
// world's, and each ExternalName Service's names answered with its target's addresses
// (what kube-dns's CNAME leads to; Istio's DNS proxy forwards such a name to kube-dns).
func podNameTable(m *model.Model, ns string, world map[string][]netip.Addr) map[string][]netip.Addr {
	names := withWorld(m.NameTable(ns), world)
	for alias, target := range m.Aliases(ns) {
		if a := names[target]; len(a) > 0 {
			if _, ok := names[alias]; !ok {
				names[alias] = a
			}
		}
	}
	return names
}

// Wait blocks until ctx ends. It exists so callers read as "start, wait, close".
func (l *Lab) Wait(ctx context.Context) { <-ctx.Done() }

// ExampleRequest suggests a request a learner can send to see the mesh at work: the first
// upstream a sidecar pod's app calls itself (the scenario's own client, e.g. frontend ->
// backend), else from the first pod with a sidecar to the first HTTP service in its
// namespace that it does not belong to. ok is false when the lab has no such pair.
func (l *Lab) ExampleRequest() (pod, url string, ok bool) {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	for _, p := range m.Pods {
		if p.Sidecar.Inject && len(p.App.Upstreams) > 0 {
			return p.Key(), p.App.Upstreams[0], true
		}
	}
	for _, p := range m.Pods {
		if !p.Sidecar.Inject {
			continue
		}
		for _, s := range m.Services {
			if s.Namespace != p.Namespace || s.Selects(p.Labels) {
				continue
			}
			for _, sp := range s.Ports {
				if sp.Protocol.IsHTTPOrSniffed() {
					return p.Key(), fmt.Sprintf("http://%s:%d/", s.Name, sp.Port), true
				}
			}
		}
	}
	return "", "", false
}
