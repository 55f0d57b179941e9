// Package faults is the lab's machinery faults (`meshlab fault add|list|clear`): it
// checks a fault, puts it in force (push delays and holds, a NACK, the control plane
// stopped for a while, the CA's clock shifted, a proxy epoch or an agent killed), lists
// the ones in force and undoes them, publishing fault.added and fault.cleared. It reads
// and acts on the lab only through Deps, so it sits below package lab and never imports
// it.
package faults

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// Fault events on the lab's bus.
const (
	EventFaultAdded   = "fault.added"
	EventFaultCleared = "fault.cleared"
)

// maxStop bounds discovery-stop, so a typo does not stop a lab's control plane for a day.
const maxStop = 10 * time.Minute

// Deps is what the faults act on.
type Deps struct {
	Lab       Lab          // required: the lab's pods, agents, CA clock and event bus
	Discovery Discovery    // required: the xDS server, where push faults act
	Procs     Processes    // required: the processes kill-proxy and kill-agent signal
	Log       *slog.Logger // optional: a line per fault added and cleared
}

// Lab is the running lab as the faults see it. Its methods are safe for concurrent use.
type Lab interface {
	// SidecarPod is the pod named name, which must have a sidecar; the error wraps
	// api.ErrUnknownPod or api.ErrNoSidecar and lists the pods with one.
	SidecarPod(name string) (*model.Pod, error)
	// SidecarPodNames lists the pods with a sidecar, sorted.
	SidecarPodNames() []string
	// AgentStatus is the pod agent's /status (its proxy epochs and their pids).
	AgentStatus(ctx context.Context, pod string) (agentapi.Status, error)
	// SetCAClockOffset shifts the CA's clock for the certificates it issues; 0 resets it.
	SetCAClockOffset(d time.Duration)
	// Publish puts an event on the lab's bus.
	Publish(kind, pod, msg string, fields map[string]any)
}

// Discovery is the part of the xDS server (controlplane/discovery.Server) faults use;
// node is a proxy's node id.
type Discovery interface {
	SetPushDelay(node string, d time.Duration)
	HoldPushes(node string)
	ReleasePushes(node string)
	// SetNack makes the proxy refuse (on) or accept again the config it is sent.
	SetNack(ctx context.Context, node string, on bool) error
	// StopFor closes the server's connections and refuses new ones for d; 0 ends it.
	StopFor(d time.Duration)
}

// Processes are the processes of the lab's pods.
type Processes interface {
	// PodPIDs lists the processes in the pod's network namespace.
	PodPIDs(pod string) ([]int, error)
	// Cmdline is the process's argv ("" for one that is gone).
	Cmdline(pid int) []string
	// Kill sends the process SIGKILL.
	Kill(pid int) error
}

// Set is the lab's faults in force. The zero value is ready; safe for concurrent use.
type Set struct {
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

// List lists the faults in force.
func (s *Set) List() []api.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]api.Fault, 0, len(s.active))
	for _, f := range s.active {
		out = append(out, f.Fault)
	}
	return out
}

// Add checks spec, puts the fault in force and publishes fault.added. One-shot faults
// (kill-proxy, kill-agent) are done when it returns and are not listed. A refused spec
// wraps api.ErrBadFault, one already in force api.ErrFaultExists.
func (s *Set) Add(ctx context.Context, d Deps, spec api.FaultSpec) (api.Fault, error) {
	nodes, err := check(d.Lab, spec)
	if err != nil {
		return api.Fault{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.active {
		if f.Kind == spec.Kind && (spec.Kind == api.FaultDiscoveryStop || overlaps(f.Pods, spec.Pods)) {
			return api.Fault{}, fmt.Errorf("%w: %s (%s) is already in force; clear it first with `meshlab fault clear %s`",
				api.ErrFaultExists, f.ID, describe(f.FaultSpec), f.ID)
		}
	}
	s.next++
	f := &activeFault{Fault: api.Fault{ID: "f" + strconv.Itoa(s.next), FaultSpec: spec, Started: time.Now()}, nodes: nodes}
	keep := true
	switch spec.Kind {
	case api.FaultDelayPush:
		for _, n := range nodes {
			d.Discovery.SetPushDelay(n, spec.Delay)
		}
	case api.FaultHoldPush:
		for _, n := range nodes {
			d.Discovery.HoldPushes(n)
		}
	case api.FaultNack:
		if err := d.Discovery.SetNack(ctx, nodes[0], true); err != nil {
			_ = d.Discovery.SetNack(context.WithoutCancel(ctx), nodes[0], false)
			return api.Fault{}, fmt.Errorf("add nack fault on %s: %w", spec.Pods[0], err)
		}
	case api.FaultDiscoveryStop:
		until := f.Started.Add(spec.Duration)
		f.Until = &until
		d.Discovery.StopFor(spec.Duration)
		f.timer = time.AfterFunc(spec.Duration, func() { s.expire(d, f) })
	case api.FaultCAClock:
		d.Lab.SetCAClockOffset(spec.Offset)
	case api.FaultKillProxy:
		keep = false
		if f.Message, err = killProxy(ctx, d, spec.Pods[0]); err != nil {
			return api.Fault{}, err
		}
	case api.FaultKillAgent:
		keep = false
		if f.Message, err = killAgent(d.Procs, spec.Pods[0]); err != nil {
			return api.Fault{}, err
		}
	}
	if keep {
		s.active = append(s.active, f)
	}
	msg := f.ID + ": " + describe(spec)
	if f.Message != "" {
		msg += ": " + f.Message
	}
	logger(d).Warn("fault added", "id", f.ID, "fault", describe(spec))
	d.Lab.Publish(EventFaultAdded, strings.Join(spec.Pods, ","), msg, fields(f.Fault))
	return f.Fault, nil
}

// Clear undoes the fault id, or every fault when id is "", and publishes fault.cleared
// for each. An id not in force wraps api.ErrUnknownFault.
func (s *Set) Clear(ctx context.Context, d Deps, id string) ([]api.Fault, error) {
	s.mu.Lock()
	var clear []*activeFault
	if id == "" {
		clear, s.active = s.active, nil
	} else {
		i := slices.IndexFunc(s.active, func(f *activeFault) bool { return f.ID == id })
		if i < 0 {
			ids := make([]string, 0, len(s.active))
			for _, f := range s.active {
				ids = append(ids, f.ID)
			}
			s.mu.Unlock()
			return nil, fmt.Errorf("%w %q (active: %s)", api.ErrUnknownFault, id, orNone(ids))
		}
		clear = []*activeFault{s.active[i]}
		s.active = slices.Delete(s.active, i, i+1)
	}
	s.mu.Unlock()
	out := []api.Fault{}
	var errs []string
	for _, f := range clear {
		if err := undo(ctx, d, f); err != nil {
			errs = append(errs, err.Error())
		}
		logger(d).Info("fault cleared", "id", f.ID)
		d.Lab.Publish(EventFaultCleared, strings.Join(f.Pods, ","), f.ID+": "+describe(f.FaultSpec)+" cleared", fields(f.Fault))
		out = append(out, f.Fault)
	}
	if errs != nil {
		return out, fmt.Errorf("clear faults: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// undo takes f out of force.
func undo(ctx context.Context, d Deps, f *activeFault) error {
	switch f.Kind {
	case api.FaultDelayPush:
		for _, n := range f.nodes {
			d.Discovery.SetPushDelay(n, 0)
		}
	case api.FaultHoldPush:
		for _, n := range f.nodes {
			d.Discovery.ReleasePushes(n)
		}
	case api.FaultNack:
		if err := d.Discovery.SetNack(ctx, f.nodes[0], false); err != nil {
			return fmt.Errorf("clear nack fault on %s: %w", f.Pods[0], err)
		}
	case api.FaultDiscoveryStop:
		f.timer.Stop()
		d.Discovery.StopFor(0)
	case api.FaultCAClock:
		d.Lab.SetCAClockOffset(0)
	}
	return nil
}

// expire removes a fault that ended by itself.
func (s *Set) expire(d Deps, f *activeFault) {
	s.mu.Lock()
	i := slices.Index(s.active, f)
	if i >= 0 {
		s.active = slices.Delete(s.active, i, i+1)
	}
	s.mu.Unlock()
	if i >= 0 {
		d.Lab.Publish(EventFaultCleared, "", f.ID+": "+describe(f.FaultSpec)+" ended", fields(f.Fault))
	}
}

// check validates spec and returns the node ids of its pods.
func check(l Lab, spec api.FaultSpec) ([]string, error) {
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
		return nil, bad("needs a pod (pods with a sidecar: %s)", strings.Join(l.SidecarPodNames(), ", "))
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
		p, err := l.SidecarPod(name)
		if err != nil {
			return nil, fmt.Errorf("add %s fault: %w", spec.Kind, err)
		}
		nodes = append(nodes, p.NodeID())
	}
	return nodes, nil
}

// killProxy SIGKILLs the live proxy epoch of pod, as its agent reports it.
func killProxy(ctx context.Context, d Deps, pod string) (string, error) {
	st, err := d.Lab.AgentStatus(ctx, pod)
	if err != nil {
		return "", fmt.Errorf("kill proxy of %s: read agent status: %w", pod, err)
	}
	for i := len(st.Epochs) - 1; i >= 0; i-- {
		e := st.Epochs[i]
		if e.State == agentapi.EpochLive && e.PID > 0 {
			if err := d.Procs.Kill(e.PID); err != nil {
				return "", fmt.Errorf("kill proxy epoch %d (pid %d) of %s: %w", e.Epoch, e.PID, pod, err)
			}
			return fmt.Sprintf("killed proxy epoch %d (pid %d)", e.Epoch, e.PID), nil
		}
	}
	return "", fmt.Errorf("kill proxy of %s: %w: no live epoch", pod, api.ErrBadFault)
}

// killAgent SIGKILLs the agent of pod (found among the processes in the pod's
// namespace by its command line, `meshlab agent ...`); the lab's supervisor restarts it.
func killAgent(p Processes, pod string) (string, error) {
	pids, err := p.PodPIDs(pod)
	if err != nil {
		return "", fmt.Errorf("kill agent of %s: %w", pod, err)
	}
	for _, pid := range pids {
		if argv := p.Cmdline(pid); len(argv) < 2 || argv[1] != "agent" {
			continue
		}
		if err := p.Kill(pid); err != nil {
			return "", fmt.Errorf("kill agent (pid %d) of %s: %w", pid, pod, err)
		}
		return fmt.Sprintf("killed agent (pid %d)", pid), nil
	}
	return "", fmt.Errorf("kill agent of %s: no agent process is running", pod)
}

func logger(d Deps) *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
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

// describe says in a few words what spec does.
func describe(spec api.FaultSpec) string {
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

func fields(f api.Fault) map[string]any {
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
