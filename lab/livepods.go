package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
)

// Pods come and go in a running lab as `kubectl apply` and `kubectl delete` make and
// remove them: a new Deployment, Pod or Workload (or more replicas) gets its namespace,
// link, capture rules (or cluster DNS), agent and app exactly as `up` makes them
// (startPod), at an address no running pod holds (config's sticky allocation) and an app
// uid of the lab's block; a removed pod is stopped as `down` stops one (its app, then its
// agent, which drains the proxy), and its namespace and link are deleted; a pod whose
// spec changed beyond its labels and proxy settings is replaced (removed, then made
// again: a Deployment's new template gives new pod names, as its rollout does). The
// model, xDS, DNS and kube-proxy change first, under l.mu, as any apply does (so a
// removed pod's endpoints are gone before it stops, as Kubernetes removes a terminating
// pod's endpoints); the pods change after, under applyMu only, so the lab's API keeps
// answering while agents drain and proxies start.

// livePods is the lab's state for pods added and removed while it runs. Its zero value is
// ready to use.
type livePods struct {
	// applyMu serializes Apply and Delete, which change pods after releasing l.mu. It is
	// taken before l.mu.
	applyMu sync.Mutex
	// nodes are the proxies the control plane serves (xdsauth.go), replaced whole.
	nodes atomic.Pointer[proxyNodes]

	closed bool // under applyMu: the lab is stopping, apply changes nothing more

	mu      sync.Mutex
	cancels map[string]context.CancelFunc // per pod: ends what the lab serves inside it
	closing bool                          // the lab is stopping: make no pod
	endWait context.CancelFunc            // ends reconcilePods' wait for new pods
}

// errLabStopping refuses an apply or delete that comes while the lab stops.
var errLabStopping = errors.New("the lab is stopping")

// stopLivePods, as the lab starts to stop, cuts short a change of pods in progress
// (its wait for new pods), waits for it to end, and makes every later apply and delete
// fail: no pod is made once Close has begun removing them.
func (l *Lab) stopLivePods() {
	l.live.mu.Lock()
	l.live.closing = true
	if l.live.endWait != nil {
		l.live.endWait()
	}
	l.live.mu.Unlock()
	l.live.applyMu.Lock()
	l.live.closed = true
	l.live.applyMu.Unlock()
}

// podContext returns a context that ends when the lab's servers stop or pod is removed:
// what the lab serves inside the pod's namespace (its cluster DNS) lives that long, so
// no socket keeps a removed pod's namespace alive.
func (l *Lab) podContext(pod string) context.Context {
	l.live.mu.Lock()
	defer l.live.mu.Unlock()
	if l.live.cancels == nil {
		l.live.cancels = map[string]context.CancelFunc{}
	}
	if cancel := l.live.cancels[pod]; cancel != nil {
		cancel() // a pod made again under the same name
	}
	ctx, cancel := context.WithCancel(l.serverCtx)
	l.live.cancels[pod] = cancel
	return ctx
}

// endPodContext ends podContext(pod).
func (l *Lab) endPodContext(pod string) {
	l.live.mu.Lock()
	defer l.live.mu.Unlock()
	if cancel := l.live.cancels[pod]; cancel != nil {
		cancel()
		delete(l.live.cancels, pod)
	}
}

// podPlan is how the lab's pods change from one model to the next.
type podPlan struct {
	remove []*model.Pod // pods of the running model to stop, in model order
	add    []*model.Pod // pods of the next model to make, in model order
}

func (p podPlan) empty() bool { return len(p.remove) == 0 && len(p.add) == 0 }

// podSpec is what of a pod needs its processes and namespace made again when it changes:
// everything but its labels (they only move endpoints), where it came from, and its
// sidecar's proxy settings (the agent starts a new proxy epoch, pushProxySettings).
func podSpec(p *model.Pod) model.Pod {
	c := *p
	// Labels and annotations change on a running pod, as in Kubernetes (ambient
	// enrollment reads both): a change of either alone does not replace the pod.
	c.Labels, c.Annotations, c.Origin = nil, nil, model.Origin{}
	c.Sidecar = c.Sidecar.WithoutProxySettings()
	return c
}

// planPods returns the pods that next adds to cur, removes from it, and replaces (in both
// lists): pods are matched by key (namespace and name).
func planPods(cur, next *model.Model) podPlan {
	var plan podPlan
	for _, p := range cur.Pods {
		n := next.Pod(p.Key())
		if n == nil || !reflect.DeepEqual(podSpec(p), podSpec(n)) {
			plan.remove = append(plan.remove, p)
		}
	}
	for _, p := range next.Pods {
		c := cur.Pod(p.Key())
		if c == nil || !reflect.DeepEqual(podSpec(c), podSpec(p)) {
			plan.add = append(plan.add, p)
		}
	}
	return plan
}

// checkPodPlan refuses, before anything changes, a plan the lab cannot carry out: a pod
// named as one of the lab's own namespaces, or more pods than the lab's app uid block.
func (l *Lab) checkPodPlan(cur *model.Model, plan podPlan) error {
	var problems []string
	for _, p := range plan.add {
		if p.Key() == nodePodName || p.Key() == worldPodName {
			problems = append(problems, fmt.Sprintf("%s: metadata.name: pod name %q is reserved for the lab's own namespace ml-%s-%s", p.Origin, p.Name, l.opts.Name, p.Name))
		}
	}
	if n := len(cur.Pods) - len(plan.remove) + len(plan.add); n > appUIDSlotSize {
		problems = append(problems, fmt.Sprintf("the lab would have %d pods, at most %d per lab", n, appUIDSlotSize))
	}
	if len(problems) > 0 {
		return fmt.Errorf("apply: %s", strings.Join(problems, "\n"))
	}
	return nil
}

// withoutPods is a model of m's pods but those of gone, for looking pods up by name.
func withoutPods(m *model.Model, gone []*model.Pod) *model.Model {
	var keep []*model.Pod
	for _, p := range m.Pods {
		if !slices.Contains(gone, p) {
			keep = append(keep, p)
		}
	}
	return model.New(nil, keep)
}

// reconcilePods carries out plan once the model is current: it removes the pods to
// remove (in parallel), then makes the pods to add (in parallel) and waits, for at most
// ReadyTimeout, until each is ready. It returns one line per pod, as `meshlab apply`
// prints them: "pod NS/NAME deleted", "pod NS/NAME created", or "pod NS/NAME FAILED: why"
// for a pod that could not be made or did not become ready; such a pod stays in the lab
// (as a crash-looping pod stays in a Deployment) and `meshlab describe pod` tells more.
// The caller holds l.live.applyMu, not l.mu.
func (l *Lab) reconcilePods(ctx context.Context, plan podPlan) []api.Change {
	if plan.empty() {
		return nil
	}
	ctx = context.WithoutCancel(ctx) // a client that goes away does not leave pods half made
	var out []api.Change
	errs := make([]error, len(plan.remove))
	var wg sync.WaitGroup
	for i, p := range plan.remove {
		wg.Go(func() { errs[i] = l.removePod(p) })
	}
	wg.Wait()
	for i, p := range plan.remove {
		if errs[i] != nil {
			out = append(out, podChange(p, api.ActionDeleted, errs[i].Error()))
			continue
		}
		out = append(out, podChange(p, api.ActionDeleted, ""))
	}

	// The record changes before anything is made, so exec, describe, down and clean see
	// the new pods from the start.
	l.rec.Pods = slices.DeleteFunc(l.rec.Pods, func(r PodRecord) bool {
		return slices.ContainsFunc(plan.remove, func(p *model.Pod) bool { return p.Key() == r.key() })
	})
	for _, p := range plan.add {
		l.rec.Pods = append(l.rec.Pods, podRecord(l.opts.Name, l.paths.PodDir(p.Key()), p))
	}
	slices.SortStableFunc(l.rec.Pods, func(a, b PodRecord) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	l.live.mu.Lock()
	readyCtx, cancel := context.WithTimeout(ctx, l.opts.ReadyTimeout)
	defer cancel()
	closing := l.live.closing
	l.live.endWait = cancel
	l.live.mu.Unlock()
	err := l.allocateAppUIDs()
	if closing {
		err = errLabStopping
	}
	if err != nil {
		for _, p := range plan.add {
			out = append(out, l.podFailed(p, err))
		}
		return out
	}
	started := make([]error, len(plan.add))
	for i, p := range plan.add {
		wg.Go(func() {
			slot, err := l.podSlot(p.Key())
			if err == nil {
				err = l.startPod(readyCtx, slot, p)
			}
			started[i] = err
		})
	}
	wg.Wait()
	for i, p := range plan.add {
		if started[i] != nil {
			out = append(out, l.podFailed(p, started[i]))
			continue
		}
		out = append(out, podChange(p, api.ActionCreated, ""))
	}
	return out
}

// podFailed reports a pod that apply could not make or that did not become ready, as up
// reports one (progress line, event), and returns apply's line for it.
func (l *Lab) podFailed(p *model.Pod, err error) api.Change {
	msg := err.Error()
	fmt.Fprintf(l.out, "pod %-20s %-15s FAILED: %s\n", p.Key(), p.IP, strings.ReplaceAll(msg, "\n", "\n    "))
	l.publish(EventPodFailed, p.Key(), msg, map[string]any{"error": msg})
	return podChange(p, api.ActionFailed, fmt.Sprintf("%s (meshlab describe pod -n %s %s)", msg, p.Namespace, p.Name))
}

// podChange is apply's change of pod p.
func podChange(p *model.Pod, action, why string) api.Change {
	return api.Change{Kind: api.PodKind, Namespace: p.Namespace, Name: p.Name, Action: action, Error: why}
}

// podRecord is pod p's entry in lab.json, without its app uid; podDir is its run
// directory.
func podRecord(lab, podDir string, p *model.Pod) PodRecord {
	return PodRecord{Name: p.Name, Namespace: p.Namespace, Key: p.Key(), NetNS: NamespaceName(lab, p.Key()), IP: p.IP, Sidecar: p.Sidecar.Inject, Workload: p.Workload, Persona: p.App.Persona,
		ProxyMounts: proxyMounts(podDir, p)} // emptydir.go
}

// EventPodDeleted reports a pod removed from a running lab (Fields: ms).
const EventPodDeleted = "pod.deleted"

// entryNetNSDeleted is the journal's record that a namespace it lists was deleted while
// the lab ran (a removed pod's): Clean no longer looks for it by name.
const entryNetNSDeleted = "netns-deleted"

// removePod stops pod p as `down` stops a lab's pods: its app, then its agent, which
// drains the proxy for the termination drain duration; then anything else still inside
// its namespace (a command started with meshlab exec); then it deletes the namespace
// and the pod's link, forgets its CA token and removes its run directory. It goes on
// after an error and returns them all.
func (l *Lab) removePod(p *model.Pod) error {
	start := time.Now()
	ns := NamespaceName(l.opts.Name, p.Key())
	if l.apps != nil {
		l.apps.stopPod(p.Key())
	}
	if l.agents != nil {
		l.agents.stopPod(p.Key())
	}
	l.endPodContext(p.Key())
	var errs []error
	if err := l.jr.add(entry{Kind: entryNetNSDeleted, Name: ns, Pod: p.Key()}); err != nil {
		errs = append(errs, err)
	}
	sys := l.syscalls()
	if netns.Exists(ns) {
		pids, err := sys.procs.PIDsIn(ns)
		if err != nil {
			errs = append(errs, err)
		}
		for _, pid := range pids {
			if pid != os.Getpid() {
				_ = sys.procs.Signal(pid, syscall.SIGKILL)
			}
		}
		for _, pid := range pids {
			waitGone(sys.procs, pid, 0, 2*time.Second)
		}
	}
	if err := sys.ns.Delete(ns); err != nil {
		errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns, err))
	}
	// The node's end of the pod's veth: deleting it deletes the pair now, even if
	// something still holds the pod's namespace, and frees its name for a pod made again
	// under the same name.
	if err := deleteNodeLink(NodeNamespace(l.opts.Name), netns.HostIfName(l.opts.Name, p.Key())); err != nil {
		errs = append(errs, err)
	}
	if l.ca != nil {
		l.ca.Tokens().RevokePod(p.Key())
	}
	if err := os.RemoveAll(l.paths.PodDir(p.Key())); err != nil {
		errs = append(errs, fmt.Errorf("remove run directory of pod %s: %w", p.Key(), err))
	}
	took := time.Since(start).Round(time.Millisecond)
	l.publish(EventPodDeleted, p.Key(), fmt.Sprintf("pod %s deleted in %s", p.Key(), took), map[string]any{"ms": took.Milliseconds()})
	fmt.Fprintf(l.out, "pod %-20s %-15s deleted in %s\n", p.Key(), p.IP, took)
	return errors.Join(errs...)
}

// deleteNodeLink deletes link name from the node namespace; a link already gone is fine.
func deleteNodeLink(nodeNS, name string) error {
	err := netns.Do(nodeNS, func() error {
		link, err := netlink.LinkByName(name)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return nil
			}
			return err
		}
		// The pair goes with the pod's namespace: when that namespace is torn down between
		// the lookup and the delete, the link is already gone, which is what was asked.
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete link %s in %s: %w", name, nodeNS, err)
	}
	return nil
}
