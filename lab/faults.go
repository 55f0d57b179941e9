package lab

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/netns"
)

// Fault events on the lab's bus.
const (
	EventFaultAdded   = "fault.added"
	EventFaultCleared = "fault.cleared"
)

// maxStop bounds discovery-stop, so a typo does not stop a lab's control plane for a day.
const maxStop = 10 * time.Minute

// faultSet is the lab's active faults. The zero value is ready; safe for concurrent use.
type faultSet struct {
	mu     sync.Mutex
	next   int
	active []*activeFault // in the order added
}

// activeFault is one fault in force and how to undo it.
type activeFault struct {
	api.Fault
	nodes []string    // node ids of Pods
	timer *time.Timer // ends a fault that clears itself
}

// Faults lists the active faults. It implements web.FaultBackend.
func (l *Lab) Faults() []api.Fault {
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	out := make([]api.Fault, 0, len(l.faults.active))
	for _, f := range l.faults.active {
		out = append(out, f.Fault)
	}
	return out
}

// AddFault checks spec, puts the fault in force and publishes fault.added. One-shot
// faults (kill-proxy, kill-agent) are done when it returns and are not listed. It
// implements web.FaultBackend.
func (l *Lab) AddFault(ctx context.Context, spec api.FaultSpec) (api.Fault, error) {
	nodes, err := l.checkFault(spec)
	if err != nil {
		return api.Fault{}, err
	}
	l.faults.mu.Lock()
	defer l.faults.mu.Unlock()
	for _, f := range l.faults.active {
		if f.Kind == spec.Kind && (spec.Kind == api.FaultDiscoveryStop || overlaps(f.Pods, spec.Pods)) {
			return api.Fault{}, fmt.Errorf("%w: %s (%s) is already in force; clear it first with `meshlab fault clear %s`",
				api.ErrFaultExists, f.ID, describeFault(f.FaultSpec), f.ID)
		}
	}
	l.faults.next++
	f := &activeFault{Fault: api.Fault{ID: "f" + strconv.Itoa(l.faults.next), FaultSpec: spec, Started: time.Now()}, nodes: nodes}
	keep := true
	switch spec.Kind {
	case api.FaultDelayPush:
		for _, n := range nodes {
			l.disc.SetPushDelay(n, spec.Delay)
		}
	case api.FaultHoldPush:
		for _, n := range nodes {
			l.disc.HoldPushes(n)
		}
	case api.FaultNack:
		if err := l.disc.SetNack(ctx, nodes[0], true); err != nil {
			_ = l.disc.SetNack(context.WithoutCancel(ctx), nodes[0], false)
			return api.Fault{}, fmt.Errorf("add nack fault on %s: %w", spec.Pods[0], err)
		}
	case api.FaultDiscoveryStop:
		until := f.Started.Add(spec.Duration)
		f.Until = &until
		l.disc.StopFor(spec.Duration)
		f.timer = time.AfterFunc(spec.Duration, func() { l.expireFault(f) })
	case api.FaultCAClock:
		l.SetCAClockOffset(spec.Offset)
	case api.FaultKillProxy:
		keep = false
		if f.Message, err = l.killProxy(ctx, spec.Pods[0]); err != nil {
			return api.Fault{}, err
		}
	case api.FaultKillAgent:
		keep = false
		if f.Message, err = l.killAgent(spec.Pods[0]); err != nil {
			return api.Fault{}, err
		}
	}
	if keep {
		l.faults.active = append(l.faults.active, f)
	}
	msg := f.ID + ": " + describeFault(spec)
	if f.Message != "" {
		msg += ": " + f.Message
	}
	l.log.Warn("fault added", "id", f.ID, "fault", describeFault(spec))
	l.publish(EventFaultAdded, strings.Join(spec.Pods, ","), msg, faultFields(f.Fault))
	return f.Fault, nil
}

// ClearFaults undoes the fault id, or every fault when id is "", and publishes
// fault.cleared for each. It implements web.FaultBackend.
func (l *Lab) ClearFaults(ctx context.Context, id string) ([]api.Fault, error) {
	l.faults.mu.Lock()
	var clear []*activeFault
	if id == "" {
		clear, l.faults.active = l.faults.active, nil
	} else {
		i := slices.IndexFunc(l.faults.active, func(f *activeFault) bool { return f.ID == id })
		if i < 0 {
			ids := make([]string, 0, len(l.faults.active))
			for _, f := range l.faults.active {
				ids = append(ids, f.ID)
			}
			l.faults.mu.Unlock()
			return nil, fmt.Errorf("%w %q (active: %s)", api.ErrUnknownFault, id, orNone(ids))
		}
		clear = []*activeFault{l.faults.active[i]}
		l.faults.active = slices.Delete(l.faults.active, i, i+1)
	}
	l.faults.mu.Unlock()
	out := []api.Fault{}
	var errs []string
	for _, f := range clear {
		if err := l.undoFault(ctx, f); err != nil {
			errs = append(errs, err.Error())
		}
		l.log.Info("fault cleared", "id", f.ID)
		l.publish(EventFaultCleared, strings.Join(f.Pods, ","), f.ID+": "+describeFault(f.FaultSpec)+" cleared", faultFields(f.Fault))
		out = append(out, f.Fault)
	}
	if errs != nil {
		return out, fmt.Errorf("clear faults: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// undoFault takes f out of force.
func (l *Lab) undoFault(ctx context.Context, f *activeFault) error {
	switch f.Kind {
	case api.FaultDelayPush:
		for _, n := range f.nodes {
			l.disc.SetPushDelay(n, 0)
		}
	case api.FaultHoldPush:
		for _, n := range f.nodes {
			l.disc.ReleasePushes(n)
		}
	case api.FaultNack:
		if err := l.disc.SetNack(ctx, f.nodes[0], false); err != nil {
			return fmt.Errorf("clear nack fault on %s: %w", f.Pods[0], err)
		}
	case api.FaultDiscoveryStop:
		f.timer.Stop()
		l.disc.StopFor(0)
	case api.FaultCAClock:
		l.SetCAClockOffset(0)
	}
	return nil
}

// expireFault removes a fault that ended by itself.
func (l *Lab) expireFault(f *activeFault) {
	l.faults.mu.Lock()
	i := slices.Index(l.faults.active, f)
	if i >= 0 {
		l.faults.active = slices.Delete(l.faults.active, i, i+1)
	}
	l.faults.mu.Unlock()
	if i >= 0 {
		l.publish(EventFaultCleared, "", f.ID+": "+describeFault(f.FaultSpec)+" ended", faultFields(f.Fault))
	}
}

// checkFault validates spec and returns the node ids of its pods.
func (l *Lab) checkFault(spec api.FaultSpec) ([]string, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", api.ErrBadFault, spec.Kind, fmt.Sprintf(format, a...))
	}
	wantPods := map[string][2]int{ // min, max
		api.FaultDelayPush: {1, 1 << 20}, api.FaultHoldPush: {1, 1 << 20}, api.FaultNack: {1, 1},
		api.FaultKillProxy: {1, 1}, api.FaultKillAgent: {1, 1}, api.FaultDiscoveryStop: {0, 0}, api.FaultCAClock: {0, 0},
	}
	want, ok := wantPods[spec.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %q (valid: %s)", api.ErrBadFault, spec.Kind, strings.Join(api.FaultKinds, ", "))
	}
	switch n := len(spec.Pods); {
	case want[1] == 0 && n > 0:
		return nil, bad("takes no pod")
	case n < want[0]:
		return nil, bad("needs a pod (pods with a sidecar: %s)", strings.Join(l.sidecarPodNames(), ", "))
	case n > want[1]:
		return nil, bad("takes exactly one pod, got %d", n)
	}
	switch spec.Kind {
	case api.FaultDelayPush:
		if spec.Delay <= 0 {
			return nil, bad("needs a delay above zero")
		}
	case api.FaultDiscoveryStop:
		if spec.Duration <= 0 || spec.Duration > maxStop {
			return nil, bad("needs a duration above zero and at most %s", maxStop)
		}
	case api.FaultCAClock:
		if spec.Offset == 0 {
			return nil, bad("needs a non-zero offset (e.g. -25h)")
		}
	}
	var nodes []string
	for i, name := range spec.Pods {
		if slices.Contains(spec.Pods[:i], name) {
			return nil, bad("pod %s named twice", name)
		}
		p, err := l.sidecarPod(name)
		if err != nil {
			return nil, fmt.Errorf("add %s fault: %w", spec.Kind, err)
		}
		nodes = append(nodes, p.NodeID())
	}
	return nodes, nil
}

// killProxy SIGKILLs the live proxy epoch of pod, as its agent reports it.
func (l *Lab) killProxy(ctx context.Context, pod string) (string, error) {
	c := newAgentClient(l.paths.AgentSocket(pod))
	defer c.close()
	st, err := c.status(ctx)
	if err != nil {
		return "", fmt.Errorf("kill proxy of %s: read agent status: %w", pod, err)
	}
	for i := len(st.Epochs) - 1; i >= 0; i-- {
		e := st.Epochs[i]
		if e.State == agent.EpochLive && e.PID > 0 {
			if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
				return "", fmt.Errorf("kill proxy epoch %d (pid %d) of %s: %w", e.Epoch, e.PID, pod, err)
			}
			return fmt.Sprintf("killed proxy epoch %d (pid %d)", e.Epoch, e.PID), nil
		}
	}
	return "", fmt.Errorf("kill proxy of %s: %w: no live epoch", pod, api.ErrBadFault)
}

// killAgent SIGKILLs the agent of pod (found among the processes in the pod's
// namespace by its command line); the lab's supervisor restarts it.
func (l *Lab) killAgent(pod string) (string, error) {
	pids, err := netns.PIDsIn(NamespaceName(l.opts.Name, pod))
	if err != nil {
		return "", fmt.Errorf("kill agent of %s: %w", pod, err)
	}
	for _, pid := range pids {
		if !isAgent(pid) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return "", fmt.Errorf("kill agent (pid %d) of %s: %w", pid, pod, err)
		}
		return fmt.Sprintf("killed agent (pid %d)", pid), nil
	}
	return "", fmt.Errorf("kill agent of %s: no agent process is running", pod)
}

// isAgent reports whether pid runs `meshlab agent`.
func isAgent(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv := strings.Split(string(b), "\x00")
	return len(argv) > 1 && argv[1] == "agent"
}

func overlaps(a, b []string) bool {
	return slices.ContainsFunc(a, func(s string) bool { return slices.Contains(b, s) })
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// describeFault says in a few words what spec does.
func describeFault(spec api.FaultSpec) string {
	switch spec.Kind {
	case api.FaultDelayPush:
		return fmt.Sprintf("delay-push %s to %s", spec.Delay, strings.Join(spec.Pods, ", "))
	case api.FaultDiscoveryStop:
		return fmt.Sprintf("discovery-stop for %s", spec.Duration)
	case api.FaultCAClock:
		return fmt.Sprintf("ca-clock offset %s", spec.Offset)
	}
	return spec.Kind + " " + strings.Join(spec.Pods, ", ")
}

func faultFields(f api.Fault) map[string]any {
	m := map[string]any{"id": f.ID, "kind": f.Kind, "pods": f.Pods}
	if f.Delay > 0 {
		m["delayMs"] = f.Delay.Milliseconds()
	}
	if f.Duration > 0 {
		m["durationMs"] = f.Duration.Milliseconds()
	}
	if f.Offset != 0 {
		m["offset"] = f.Offset.String()
	}
	return m
}
