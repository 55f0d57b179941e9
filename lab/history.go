package lab

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/web"
)

// applyTrigger names the objects an apply or delete changed, for the config history.
func applyTrigger(changes []config.Change) string {
	var objs []string
	for _, c := range changes {
		if c.Action != "unchanged" {
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
		return nil, fmt.Errorf("pod %s: %w", name, web.ErrNoSidecar)
	}
	return p, nil
}

// sidecarPodNames lists the pods with a sidecar, sorted.
func (l *Lab) sidecarPodNames() []string {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	var out []string
	for _, p := range m.Pods {
		if p.Sidecar.Inject {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// PodHistory implements web.HistoryReader.
func (l *Lab) PodHistory(pod string) (web.PodHistory, error) {
	p, err := l.sidecarPod(pod)
	if err != nil {
		return web.PodHistory{}, err
	}
	out := web.PodHistory{Pod: p.Name, NodeID: p.NodeID(), Snapshots: []web.HistorySnapshot{}}
	for _, s := range l.disc.History(p.NodeID()) {
		hs := web.HistorySnapshot{Version: s.Version, Time: s.Time, Trigger: s.Trigger, Types: map[string]web.HistoryType{}}
		for _, typ := range slices.Sorted(maps.Keys(s.Types)) {
			t := s.Types[typ]
			hs.Types[shortType(typ)] = web.HistoryType{Resources: t.Resources, State: t.State, Error: t.Error}
		}
		out.Snapshots = append(out.Snapshots, hs)
	}
	return out, nil
}

// PodDiff implements web.HistoryReader.
func (l *Lab) PodDiff(pod, from, to string) (web.ConfigDiff, error) {
	p, err := l.sidecarPod(pod)
	if err != nil {
		return web.ConfigDiff{}, err
	}
	d, err := l.disc.Diff(p.NodeID(), from, to)
	if errors.Is(err, discovery.ErrUnknownVersion) {
		return web.ConfigDiff{}, fmt.Errorf("pod %s: %w: %w", pod, web.ErrUnknownVersion, err)
	}
	if err != nil {
		return web.ConfigDiff{}, err
	}
	out := web.ConfigDiff{Pod: p.Name, From: d.From, To: d.To, Types: []web.ConfigTypeDiff{}}
	for _, td := range d.Types {
		wt := web.ConfigTypeDiff{Type: shortType(td.TypeURL), Added: td.Added, Removed: td.Removed}
		for _, rc := range td.Changed {
			wc := web.ConfigResourceChange{Name: rc.Name}
			for _, f := range rc.Fields {
				wc.Fields = append(wc.Fields, web.ConfigFieldChange{Path: f.Path, Old: f.Old, New: f.New})
			}
			wt.Changed = append(wt.Changed, wc)
		}
		out.Types = append(out.Types, wt)
	}
	return out, nil
}
