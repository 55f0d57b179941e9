package lab

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/web"
)

var (
	_ web.ConfigStore       = (*Lab)(nil)
	_ web.ProxyStatusReader = (*Lab)(nil)
)

// currentScenario returns the lab's objects: the scenario it started with, as changed by
// every apply and delete since. The caller holds l.mu.
func (l *Lab) currentScenario() (*config.Scenario, error) {
	if l.scenario == nil {
		sc, err := config.Load(l.opts.ScenarioFile, l.opts.ScenarioData)
		if err != nil {
			return nil, fmt.Errorf("reload scenario: %w", err)
		}
		l.scenario = sc
	}
	return l.scenario, nil
}

// Apply creates or replaces the objects of files in the running lab, atomically: the
// whole set is validated against the lab's current objects and the new model is built and
// turned into proxy config before anything changes; then every affected proxy is pushed a
// new version and the DNS name tables are updated. Changes that would add, remove or
// alter pods are refused (they need processes and namespaces, which apply does not make),
// except labels and sidecar proxy settings: those go to the pod's agent, which starts a
// new proxy epoch (see pushProxySettings).
// It implements web.ConfigStore.
func (l *Lab) Apply(ctx context.Context, files []web.ConfigFile) ([]string, error) {
	defer releaseMemory()
	l.mu.Lock()
	defer l.mu.Unlock()
	sc, err := l.currentScenario()
	if err != nil {
		return nil, err
	}
	next, changes, err := sc.Apply(configFiles(files)...)
	if err != nil {
		return nil, &web.ConfigError{Err: err}
	}
	if err := l.commit(ctx, next, changes); err != nil {
		return nil, err
	}
	return changeStrings(changes), nil
}

// Delete removes objects from the running lab, named by refs or by the objects of files,
// with Apply's guarantees. It implements web.ConfigStore.
func (l *Lab) Delete(ctx context.Context, files []web.ConfigFile, refs []web.ObjectRef) ([]string, error) {
	defer releaseMemory()
	var all []config.Ref
	for _, f := range files {
		rs, err := config.Refs(f.Name, []byte(f.Data))
		if err != nil {
			return nil, &web.ConfigError{Err: err}
		}
		all = append(all, rs...)
	}
	for _, r := range refs {
		all = append(all, config.Ref{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sc, err := l.currentScenario()
	if err != nil {
		return nil, err
	}
	next, changes, err := sc.Delete(all...)
	if err != nil {
		return nil, &web.ConfigError{Err: err}
	}
	if err := l.commit(ctx, next, changes); err != nil {
		return nil, err
	}
	return changeStrings(changes), nil
}

// releasingMemory is set while releaseMemory's collection runs.
var releasingMemory atomic.Bool

// releaseMemory returns what an apply or delete left unused (a large config replaced or
// reverted, a large input refused) to the OS, in the background. Go returns freed heap
// lazily, so without it the lab's RSS stays at its peak for minutes after a revert; one
// collection per config change costs milliseconds.
func releaseMemory() {
	if !releasingMemory.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer releasingMemory.Store(false)
		debug.FreeOSMemory()
	}()
}

// commit builds next's model, checks it keeps the lab's pods, pushes it to the proxies and
// the name tables, and makes it current. The caller holds l.mu.
func (l *Lab) commit(ctx context.Context, next *config.Scenario, changes []config.Change) error {
	if !slices.ContainsFunc(changes, func(c config.Change) bool { return c.Action != "unchanged" }) {
		return nil
	}
	m, err := next.Build(config.BuildOptions{PodCIDR: l.opts.PodCIDR, ServiceCIDR: l.opts.ServiceCIDR})
	if err != nil {
		return &web.ConfigError{Err: err}
	}
	if err := sameTopology(l.model, m); err != nil {
		return &web.ConfigError{Err: err}
	}
	if err := l.updateProxies(ctx, m, applyTrigger(changes)); err != nil {
		// Config that validates but cannot be generated is still the caller's to fix.
		return &web.ConfigError{Err: fmt.Errorf("generate proxy config: %w", err)}
	}
	prev := l.model
	l.model, l.scenario = m, next
	l.names.update(m)
	l.kubeDNS.update(m)
	if err := l.syncKubeProxy(); err != nil {
		l.log.Warn("kube-proxy rules not updated", "err", err)
	}
	for _, c := range changes {
		if c.Action != "unchanged" {
			l.log.Info("config "+c.Action, "object", c.Ref.String())
			l.publish("config."+c.Action, "", c.Ref.String(), map[string]any{"kind": c.Ref.Kind, "namespace": c.Ref.Namespace, "name": c.Ref.Name})
		}
	}
	l.pushProxySettings(ctx, prev, m)
	return nil
}

// sameTopology refuses a model whose pods or service addresses differ from the running
// lab's: pods are namespaces and processes, and VIPs are in clients' DNS caches and open
// connections. Pod labels may change (they only move endpoints), and so may the proxy
// settings of a sidecar (they start a new proxy epoch).
func sameTopology(cur, next *model.Model) error {
	podKey := func(p *model.Pod) model.Pod {
		c := *p
		c.Labels, c.Origin = nil, model.Origin{}
		c.Sidecar = c.Sidecar.WithoutProxySettings() // a new proxy epoch takes those
		return c
	}
	var problems []string
	for _, p := range next.Pods {
		old := cur.Pod(p.Name)
		switch {
		case old == nil:
			problems = append(problems, fmt.Sprintf("%s: pod %s would be added", p.Origin, p.Name))
		case !reflect.DeepEqual(podKey(old), podKey(p)):
			problems = append(problems, fmt.Sprintf("%s: pod %s would change (only its labels and sidecar proxy settings may change in a running lab)", p.Origin, p.Name))
		}
	}
	for _, p := range cur.Pods {
		if next.Pod(p.Name) == nil {
			problems = append(problems, fmt.Sprintf("%s: pod %s would be removed", p.Origin, p.Name))
		}
	}
	vips := map[string]string{}
	for _, s := range cur.Services {
		vips[s.Hostname()] = s.VIP.String()
	}
	for _, s := range next.Services {
		if old, ok := vips[s.Hostname()]; ok && old != s.VIP.String() {
			problems = append(problems, fmt.Sprintf("%s: its VIP would move from %s to %s (VIPs follow service order)", s.Origin, old, s.VIP))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("apply: adding, removing or changing pods, and renumbering Services, needs a new lab (meshlab down, then up):\n%s", strings.Join(problems, "\n"))
	}
	return nil
}

// Objects lists the lab's objects of kind (any when "" or "all") and name (any when ""),
// in namespace ns (any when ""). It implements web.ConfigStore.
func (l *Lab) Objects(kind, ns, name string) ([]web.ConfigObject, error) {
	l.mu.Lock()
	sc, err := l.currentScenario()
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if kind == "all" {
		kind = ""
	}
	objs, err := sc.Find(kind, name)
	if err != nil {
		return nil, &web.ConfigError{Err: err}
	}
	out := []web.ConfigObject{}
	for _, o := range objs {
		if ns != "" && o.Origin.Namespace != ns {
			continue
		}
		out = append(out, web.ConfigObject{Kind: o.Origin.Kind, Namespace: o.Origin.Namespace, Name: o.Origin.Name, File: o.Origin.File, Object: o.JSON})
	}
	return out, nil
}

// ProxyStatus reports what the discovery server knows of each proxy, by pod. It
// implements web.ProxyStatusReader.
func (l *Lab) ProxyStatus() []web.ProxyStatus {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	pods := map[string]*model.Pod{}
	for _, p := range m.Pods {
		pods[p.NodeID()] = p
	}
	var out []web.ProxyStatus
	for _, st := range l.disc.Status() {
		ps := web.ProxyStatus{NodeID: st.NodeID, Connected: st.Connected, Types: map[string]web.TypeStatus{}}
		if p := pods[st.NodeID]; p != nil {
			ps.Pod, ps.Namespace = p.Name, p.Namespace
		}
		for _, typ := range slices.Sorted(maps.Keys(st.Types)) {
			ps.Types[shortType(typ)] = typeStatus(st.Types[typ])
		}
		out = append(out, ps)
	}
	return out
}

func typeStatus(t discovery.TypeStatus) web.TypeStatus {
	return web.TypeStatus{Want: t.Want, Sent: t.Sent, Acked: t.Acked, Nonce: t.Nonce, NackError: t.NackError, LastNack: t.LastNack}
}

// shortType names an xDS type URL as istioctl does: CDS, LDS, EDS, RDS, SDS.
func shortType(url string) string {
	switch {
	case strings.HasSuffix(url, ".Cluster"):
		return "CDS"
	case strings.HasSuffix(url, ".Listener"):
		return "LDS"
	case strings.HasSuffix(url, ".ClusterLoadAssignment"):
		return "EDS"
	case strings.HasSuffix(url, ".RouteConfiguration"):
		return "RDS"
	case strings.HasSuffix(url, ".Secret"):
		return "SDS"
	}
	return url
}

func configFiles(in []web.ConfigFile) []config.File {
	out := make([]config.File, len(in))
	for i, f := range in {
		out[i] = config.File{Name: f.Name, Data: []byte(f.Data)}
	}
	return out
}

func changeStrings(cs []config.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}
