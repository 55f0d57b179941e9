package lab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
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
// new version, the DNS name tables and kube-proxy rules are updated, and the pods change
// as Kubernetes would change them (livepods.go): new pods are made and waited for,
// removed ones stopped and deleted, changed ones replaced; a change of labels or sidecar
// proxy settings alone goes to the pod's agent, which starts a new proxy epoch (see
// pushProxySettings). Running pods and Services keep their addresses. Besides the
// objects' changes it returns one per pod made or deleted.
// It implements web.ConfigStore.
func (l *Lab) Apply(ctx context.Context, files []api.ConfigFile) ([]api.Change, error) {
	defer releaseMemory()
	l.live.applyMu.Lock()
	defer l.live.applyMu.Unlock()
	if l.live.closed {
		return nil, errLabStopping
	}
	changes, plan, err := func() ([]config.Change, podPlan, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		sc, err := l.currentScenario()
		if err != nil {
			return nil, podPlan{}, err
		}
		next, changes, err := sc.Apply(configFiles(files)...)
		var conflict *config.ConflictError
		if errors.As(err, &conflict) {
			k := api.Kind{Kind: conflict.Ref.Kind, Group: config.KindGroup(conflict.Ref.Kind)}
			resource := k.Resource(true)
			if k.Group != "" {
				resource += "." + k.Group
			}
			return nil, podPlan{}, &api.ConflictError{Resource: resource, Name: conflict.Ref.Name}
		}
		if err != nil {
			return nil, podPlan{}, &api.ConfigError{Err: err}
		}
		plan, err := l.commit(ctx, next, changes)
		return changes, plan, err
	}()
	if err != nil {
		return nil, err
	}
	out := append(apiChanges(changes), l.reconcilePods(ctx, plan)...)
	reconcileAmbient(l) // nodeagent.go: enrollment follows labels and pods
	l.plugCACerts(ctx)  // cacerts.go: Istio's plugged-in CA
	l.dnsCerts.kick(l)  // dnscerts.go: meshConfig.certificates' Secrets
	return out, nil
}

// Delete removes objects from the running lab, named by refs or by the objects of files,
// with Apply's guarantees. It implements web.ConfigStore.
func (l *Lab) Delete(ctx context.Context, files []api.ConfigFile, refs []api.ObjectRef) ([]api.Change, error) {
	defer releaseMemory()
	var all []config.Ref
	for _, f := range files {
		rs, err := config.Refs(f.Name, f.Namespace, []byte(f.Data))
		if err != nil {
			return nil, &api.ConfigError{Err: err}
		}
		all = append(all, rs...)
	}
	for _, r := range refs {
		all = append(all, config.Ref{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	l.live.applyMu.Lock()
	defer l.live.applyMu.Unlock()
	if l.live.closed {
		return nil, errLabStopping
	}
	changes, plan, err := func() ([]config.Change, podPlan, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		sc, err := l.currentScenario()
		if err != nil {
			return nil, podPlan{}, err
		}
		next, changes, err := sc.Delete(all...)
		if err != nil {
			return nil, podPlan{}, &api.ConfigError{Err: err}
		}
		plan, err := l.commit(ctx, next, changes)
		return changes, plan, err
	}()
	if err != nil {
		return nil, err
	}
	out := append(apiChanges(changes), l.reconcilePods(ctx, plan)...)
	reconcileAmbient(l) // nodeagent.go: enrollment follows labels and pods
	l.dnsCerts.kick(l)  // dnscerts.go: a deleted DNS certificate is made again
	return out, nil
}

// releaseDelay is how long after an apply or delete the lab returns freed memory to the
// OS: long enough for the push the change caused to be ACKed, and for the next change
// of a quick series to come first (the forced collection and the scavenging of every
// free page cost ~30 ms of CPU at 100 proxies, more than the rest of a VirtualService
// apply, and at 300 ms they fell inside the next apply's push: issue 30), short enough
// that the RSS a user watches falls right after.
const releaseDelay = time.Second

// release is releaseMemory's timer; applies within releaseDelay of each other share
// one collection.
var release struct {
	mu    sync.Mutex
	timer *time.Timer
}

// releaseMemory returns what an apply or delete left unused (a large config replaced or
// reverted, a large input refused) to the OS, releaseDelay after the last one, in the
// background. Go returns freed heap lazily, so without it the lab's RSS stays at its
// peak for minutes after a revert; one collection per burst of config changes costs
// milliseconds.
func releaseMemory() {
	release.mu.Lock()
	defer release.mu.Unlock()
	if release.timer == nil {
		release.timer = time.AfterFunc(releaseDelay, debug.FreeOSMemory)
		return
	}
	release.timer.Reset(releaseDelay)
}

// commit builds next's model, keeping the running pods' and Services' addresses, checks
// the lab can make its pods, makes it current, queues its push to the proxies
// (lab/push: the push runs after commit returns, unless pods change, when commit waits
// for it) and updates the name tables and kube-proxy. It returns how the pods must
// change (reconcilePods). The caller holds l.mu and l.live.applyMu.
func (l *Lab) commit(ctx context.Context, next *config.Scenario, changes []config.Change) (podPlan, error) {
	if !slices.ContainsFunc(changes, func(c config.Change) bool { return c.Action != "unchanged" && c.Action != config.ActionSkipped }) {
		return podPlan{}, nil
	}
	m, err := next.Build(config.BuildOptions{PodCIDR: l.opts.PodCIDR, ServiceCIDR: l.opts.ServiceCIDR, Keep: config.AllocationsOf(l.model)})
	if err != nil {
		return podPlan{}, &api.ConfigError{Err: err}
	}
	m = withEnrolled(l, m) // nodeagent.go: the running pods' redirection annotations
	plan := planPods(l.model, m)
	if err := l.checkPodPlan(l.model, plan); err != nil {
		return podPlan{}, &api.ConfigError{Err: err}
	}
	prev := l.model
	l.model, l.scenario = m, next
	if l.ca != nil {
		// istiod's CA names identities in the mesh config's trust domain as it reads it
		// when signing: certificates issued from now on carry the installed one.
		l.ca.Authority().SetTrustDomain(m.Mesh.TrustDomain)
	}
	// The proxies' config is generated and pushed after the change is stored, in the
	// background (lab/push); pods change only once it is pushed, as before.
	l.push.Store(applyTrigger(changes), func(ctx context.Context, trigger string) error {
		if err := l.updateProxies(ctx, m, trigger); err != nil {
			l.log.Error("proxy config not pushed", "trigger", trigger, "err", err)
			l.publish(EventPushFailed, "", "proxy config not pushed: "+err.Error(), map[string]any{"error": err.Error(), "trigger": trigger})
			return fmt.Errorf("generate proxy config: %w", err)
		}
		return nil
	})
	if !plan.empty() {
		// A push that left some proxies on their previous config (discovery.ProxyErrors)
		// gave every other its new one: the pods change as the model says.
		if err := l.push.Flush(ctx); err != nil && !errors.As(err, new(*discovery.ProxyErrors)) {
			return podPlan{}, err
		}
	}
	l.setProxyNodes(m)
	l.names.update(m)
	l.kubeDNS.update(m)
	if err := l.syncKubeProxy(); err != nil {
		l.log.Warn("kube-proxy rules not updated", "err", err)
	}
	if svcs := serviceRecords(m); l.rec != nil && l.jr != nil && !reflect.DeepEqual(svcs, l.rec.Services) {
		l.rec.Services = svcs // port-forward reads them
		if err := writeRecord(l.paths.Record(), l.rec); err != nil {
			l.log.Warn("lab record not updated", "err", err)
		}
	}
	for _, c := range changes {
		if c.Action != "unchanged" && c.Action != config.ActionSkipped {
			l.log.Info("config "+c.Action, "object", c.Ref.String())
			l.publish("config."+c.Action, "", c.Ref.String(), map[string]any{"kind": c.Ref.Kind, "namespace": c.Ref.Namespace, "name": c.Ref.Name})
		}
	}
	// A pod being replaced gets no settings: its successor starts with them.
	l.pushProxySettings(ctx, withoutPods(prev, plan.remove), m)
	return plan, nil
}

// Objects lists the lab's objects of kind (any when "" or "all") and name (any when ""),
// in namespace ns (any when ""). It implements web.ConfigStore.
func (l *Lab) Objects(kind, ns, name string) ([]api.ConfigObject, error) {
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
		return nil, &api.ConfigError{Err: err}
	}
	out := []api.ConfigObject{}
	for _, o := range objs {
		if ns != "" && o.Origin.Namespace != ns {
			continue
		}
		out = append(out, api.ConfigObject{Kind: o.Origin.Kind, Namespace: o.Origin.Namespace, Name: o.Origin.Name, File: o.Origin.File, Object: o.JSON})
	}
	return out, nil
}

// ProxyStatus reports what the discovery server knows of each proxy, by pod. It
// implements web.ProxyStatusReader.
func (l *Lab) ProxyStatus() []api.ProxyStatus {
	l.push.Settle(settleTimeout) // an apply that returned shows its push (STALE until ACKed)
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	pods := map[string]*model.Pod{}
	for _, p := range m.Pods {
		pods[p.NodeID()] = p
	}
	var out []api.ProxyStatus
	for _, st := range l.disc.Status() {
		ps := api.ProxyStatus{NodeID: st.NodeID, Connected: st.Connected, Types: map[string]api.TypeStatus{}, PushError: st.PushError}
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

// settleTimeout bounds how long a reader of the proxies' state waits for the pushes of
// changes already applied (lab/push): a push takes milliseconds to a second at 1000
// proxies.
const settleTimeout = 10 * time.Second

func typeStatus(t discovery.TypeStatus) api.TypeStatus {
	return api.TypeStatus{Want: t.Want, Sent: t.Sent, Acked: t.Acked, Nonce: t.Nonce, NackError: t.NackError, LastNack: t.LastNack, LastAck: t.LastAck}
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
	case strings.HasSuffix(url, "/istio.workload.Address"):
		return "WDS"
	case strings.HasSuffix(url, "/istio.security.Authorization"):
		return "WADS"
	}
	return url
}

func configFiles(in []api.ConfigFile) []config.File {
	out := make([]config.File, len(in))
	for i, f := range in {
		out[i] = config.File{Name: f.Name, Data: []byte(f.Data), Namespace: f.Namespace, LastApplied: f.LastApplied}
	}
	return out
}

func apiChanges(cs []config.Change) []api.Change {
	out := make([]api.Change, len(cs))
	for i, c := range cs {
		out[i] = api.Change{Kind: c.Ref.Kind, Namespace: c.Ref.Namespace, Name: c.Ref.Name, Action: c.Action, Reason: c.Reason, Unrecorded: c.Unrecorded}
	}
	return out
}

// Kinds lists the kinds of object the lab holds, each with its API group and every
// spelling a user may type for it (the lab's discovery, as an API server's). It
// implements web.ConfigStore.
func (l *Lab) Kinds() api.Kinds {
	return labKinds()
}

// labKinds is controlplane/config's kind table as the lab API answers it.
func labKinds() api.Kinds {
	var out api.Kinds
	for _, k := range config.Kinds() {
		out = append(out, api.Kind{Kind: k, Group: config.KindGroup(k), Names: config.KindSpellings(k), Note: config.StoredKindNote(k)})
	}
	return out
}

// syncWaiter is the lab as web.SyncWaiter sees it (GET /v1/synced, `apply --wait`).
type syncWaiter struct{ l *Lab }

var _ web.SyncWaiter = syncWaiter{}

// syncPoll is how often WaitSynced checks again when no stream changed: a change the
// streams do not signal (an update that leaves a proxy to be sent a newer version while
// its earlier response is unanswered) is seen by then.
const syncPoll = 100 * time.Millisecond

// WaitSynced waits until every change applied so far is pushed and every proxy of the
// lab's pods runs the config it was sent: on each of its open streams, every response is
// ACKed and nothing newer is pending for it (discovery.Server.Unsynced). A sidecar or
// gateway pod's proxy must also be connected, as Envoy always holds a stream; a proxyless
// gRPC pod's app opens streams only while it uses xDS (a client's call), so it is judged
// by the streams it has open, which are all a proxyless client is ever sent. A push that
// failed is returned at once; a proxy that keeps rejecting its config, or one that is
// not connected, is waited for until ctx ends, and the error then names it.
//
// It checks again on each change of the streams (a response sent, ACKed, NACKed, a
// stream opened or closed), with a check that reads no status (discovery.Server.Synced),
// rather than polling: a poll every 5 ms that built every proxy's status cost the lab
// more CPU during a push to 100 proxies than the push's generation (issue 30).
func (w syncWaiter) WaitSynced(ctx context.Context) error {
	l := w.l
	if err := l.push.Flush(ctx); err != nil {
		return err
	}
	var check syncCheck
	poll := time.NewTicker(syncPoll)
	defer poll.Stop()
	for {
		changed := l.disc.SyncChanges()
		if check.synced(l) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proxies not synced: %s: %w", w.unsynced(), ctx.Err())
		case <-changed:
		case <-poll.C:
		}
	}
}

// syncCheck is WaitSynced's check, with the lab's pods by node id kept while the model
// is the same.
type syncCheck struct {
	m    *model.Model
	pods map[string]*model.Pod
}

// synced reports whether unsynced would name nothing.
func (c *syncCheck) synced(l *Lab) bool {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	if m != c.m || c.pods == nil {
		c.m, c.pods = m, podsByNode(m)
	}
	if l.disc.Disconnected(func(node string) bool { p := c.pods[node]; return p != nil && !p.Sidecar.GRPCAgent }) != "" {
		return false
	}
	return l.disc.Synced(func(node string) bool { return c.pods[node] != nil || discovery.IsZtunnel(node) })
}

// podsByNode returns m's pods by the node id of their proxy.
func podsByNode(m *model.Model) map[string]*model.Pod {
	pods := make(map[string]*model.Pod, len(m.Pods))
	for _, p := range m.Pods {
		pods[p.NodeID()] = p
	}
	return pods
}

// WaitSynced is l's GET /v1/synced (`apply --wait`), for callers in this process (the
// scenario runner): see syncWaiter.WaitSynced.
func WaitSynced(ctx context.Context, l *Lab) error { return syncWaiter{l}.WaitSynced(ctx) }

// unsynced names the first pod's proxy, or ztunnel, that does not run its current
// config, and why ("" when every one does). ztunnel's open stream is waited for as a
// pod's: an L4 policy or an enrollment is enforced there, so a check's traffic right after
// `apply --wait` must meet it (the ambient lab's policy step saw one request of five pass
// before ztunnel had the policy). Other streams of nodes that are not the model's pods (a
// removed pod's proxy draining) are not waited for; a ztunnel that is down has no stream.
func (w syncWaiter) unsynced() string {
	l := w.l
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	pods := podsByNode(m)
	for _, st := range l.disc.Status() {
		if p := pods[st.NodeID]; p != nil && !st.Connected && !p.Sidecar.GRPCAgent {
			return "pod " + p.Namespace + "/" + p.Name + " is not connected"
		}
	}
	node, why := l.disc.Unsynced(func(node string) bool { return pods[node] != nil || discovery.IsZtunnel(node) })
	if node == "" {
		return ""
	}
	p := pods[node]
	if p == nil {
		return "ztunnel " + node + " " + why
	}
	return "pod " + p.Namespace + "/" + p.Name + " " + why
}
