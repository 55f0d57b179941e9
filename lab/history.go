package lab

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
)

// applyTrigger names the objects an apply or delete changed, for the config history.
func applyTrigger(changes []config.Change) string {
	var objs []string
	for _, c := range changes {
		if c.Action != "unchanged" && c.Action != config.ActionSkipped {
			objs = append(objs, c.Ref.String()+" "+c.Action)
		}
	}
	return "apply: " + strings.Join(objs, ", ")
}

// sidecarPod returns the pod named name, which must have a sidecar.
func (l *Lab) sidecarPod(name string) (*model.Pod, error) {
	p, err := l.podNamed(name)
	if err != nil {
		return nil, fmt.Errorf("%w (pods with a sidecar: %s)", err, strings.Join(l.sidecarPodNames(), ", "))
	}
	if !p.Sidecar.Inject {
		return nil, fmt.Errorf("pod %s: %w", name, api.ErrNoSidecar)
	}
	return p, nil
}

// sidecarPodNames lists the keys of the pods with a sidecar, sorted.
func (l *Lab) sidecarPodNames() []string {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	var out []string
	for _, p := range m.Pods {
		if p.Sidecar.Inject {
			out = append(out, p.Key())
		}
	}
	slices.Sort(out)
	return out
}

// PodHistory implements web.HistoryReader: a sidecar pod's, or the lab's ztunnel's
// (its WDS and WADS versions).
func (l *Lab) PodHistory(pod string) (api.PodHistory, error) {
	key, node, err := historyNode(l, pod)
	if err != nil {
		return api.PodHistory{}, err
	}
	l.push.Settle(settleTimeout) // an apply that returned shows its version
	out := api.PodHistory{Pod: key, NodeID: node, Snapshots: []api.HistorySnapshot{}}
	for _, s := range l.disc.History(node) {
		hs := api.HistorySnapshot{Version: s.Version, Time: s.Time, Trigger: s.Trigger, Types: map[string]api.HistoryType{}}
		for _, typ := range slices.Sorted(maps.Keys(s.Types)) {
			t := s.Types[typ]
			hs.Types[shortType(typ)] = api.HistoryType{Resources: t.Resources, State: t.State, Error: t.Error}
		}
		out.Snapshots = append(out.Snapshots, hs)
	}
	return out, nil
}

// historyNode returns the key and node id of pod's proxy: the lab's ztunnel (by its pod
// name, or name.istio-system) or a pod with a sidecar.
func historyNode(l *Lab, pod string) (key, node string, err error) {
	if z := ztunnelPod(l); z != nil && (pod == z.Name || pod == z.Name+"."+z.Namespace) {
		return z.Key(), fmt.Sprintf("ztunnel~%s~%s.%s~%s.svc.%s", z.IP, z.Name, z.Namespace, z.Namespace, model.DefaultClusterDomain), nil
	}
	p, err := l.sidecarPod(pod)
	if err != nil {
		return "", "", err
	}
	return p.Key(), p.NodeID(), nil
}

// PodDiff implements web.HistoryReader.
func (l *Lab) PodDiff(pod, from, to string) (api.ConfigDiff, error) {
	p, err := l.sidecarPod(pod)
	if err != nil {
		return api.ConfigDiff{}, err
	}
	var d discovery.SnapshotDiff
	if to == discovery.GeneratorVersion {
		// With istiod as the control plane: istiod's config (from, "" for its latest)
		// against what meshlab's generator makes for the pod now.
		d, err = l.disc.DiffGenerated(p.NodeID(), from)
	} else {
		d, err = l.disc.Diff(p.NodeID(), from, to)
	}
	if errors.Is(err, discovery.ErrNoUpstream) {
		return api.ConfigDiff{}, fmt.Errorf("%w: %w", api.ErrNoIstiod, err)
	}
	if errors.Is(err, discovery.ErrUnknownVersion) {
		return api.ConfigDiff{}, fmt.Errorf("pod %s: %w: %w", pod, api.ErrUnknownVersion, err)
	}
	if err != nil {
		return api.ConfigDiff{}, err
	}
	return configDiffOf(p.Key(), d), nil
}

// DiffDecoded compares two configs of pod's proxy decoded to JSON values by type URL and
// resource name (discovery.DiffDecoded), such as a cluster's config dump and the lab
// proxy's (diff --against=cluster), in the API's form.
func DiffDecoded(pod, from, to string, a, b map[string]map[string]any) api.ConfigDiff {
	return configDiffOf(pod, discovery.DiffDecoded(pod, from, to, a, b))
}

// configDiffOf is the API's form of d, the difference of pod's configs.
func configDiffOf(pod string, d discovery.SnapshotDiff) api.ConfigDiff {
	out := api.ConfigDiff{Pod: pod, From: d.From, To: d.To, Types: []api.ConfigTypeDiff{}}
	for _, td := range d.Types {
		wt := api.ConfigTypeDiff{Type: shortType(td.TypeURL), Added: td.Added, Removed: td.Removed}
		for _, rc := range td.Changed {
			wc := api.ConfigResourceChange{Name: rc.Name}
			for _, f := range rc.Fields {
				wc.Fields = append(wc.Fields, api.ConfigFieldChange{Path: f.Path, Old: f.Old, New: f.New})
			}
			wt.Changed = append(wt.Changed, wc)
		}
		out.Types = append(out.Types, wt)
	}
	return out
}
