package faults

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
)

// fake is every dependency of the faults: a lab of three pods (frontend and backend with
// a sidecar, plain without), and a discovery server and processes that record what they
// are asked as lines.
type fake struct {
	model *model.Model

	mu       sync.Mutex
	calls    []string
	events   []api.Event
	status   map[string]agentapi.Status // by pod
	pids     map[string][]int           // by pod
	argv     map[int][]string
	nackErr  error
	killErr  error
	statuses error
}

var (
	_ Lab       = (*fake)(nil)
	_ Discovery = (*fake)(nil)
	_ Processes = (*fake)(nil)
)

func newFake() *fake {
	pod := func(name, ip string, inject bool) *model.Pod {
		return &model.Pod{Name: name, Namespace: "default", ServiceAccount: name, IP: netip.MustParseAddr(ip), Sidecar: model.SidecarSpec{Inject: inject}}
	}
	return &fake{
		model:  model.New(nil, []*model.Pod{pod("frontend", "10.244.0.2", true), pod("backend", "10.244.0.3", true), pod("plain", "10.244.0.4", false)}),
		status: map[string]agentapi.Status{}, pids: map[string][]int{}, argv: map[int][]string{},
	}
}

func (f *fake) deps() Deps { return Deps{Lab: f, Discovery: f, Procs: f} }

func (f *fake) record(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

// takeCalls returns the calls recorded since the last take.
func (f *fake) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fake) SidecarPod(name string) (*model.Pod, error) {
	p := f.model.Pod(name)
	if p == nil {
		return nil, fmt.Errorf("pod %q: %w", name, api.ErrUnknownPod)
	}
	if !p.Sidecar.Inject {
		return nil, fmt.Errorf("pod %s: %w", name, api.ErrNoSidecar)
	}
	return p, nil
}

func (f *fake) SidecarPodNames() []string { return []string{"backend", "frontend"} }

func (f *fake) AgentStatus(_ context.Context, pod string) (agentapi.Status, error) {
	return f.status[pod], f.statuses
}

func (f *fake) SetCAClockOffset(d time.Duration) { f.record("ca-clock %s", d) }

func (f *fake) Publish(kind, pod, msg string, fields map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, api.Event{Kind: kind, Pod: pod, Message: msg, Fields: fields})
}

func (f *fake) SetPushDelay(node string, d time.Duration) { f.record("delay %s %s", node, d) }
func (f *fake) HoldPushes(node string)                    { f.record("hold %s", node) }
func (f *fake) ReleasePushes(node string)                 { f.record("release %s", node) }
func (f *fake) StopFor(d time.Duration)                   { f.record("stop %s", d) }

func (f *fake) SetNack(_ context.Context, node string, on bool) error {
	f.record("nack %s %v", node, on)
	if on {
		return f.nackErr
	}
	return nil
}

func (f *fake) PodPIDs(pod string) ([]int, error) { return f.pids[pod], nil }
func (f *fake) Cmdline(pid int) []string          { return f.argv[pid] }

func (f *fake) Kill(pid int) error {
	f.record("kill %d", pid)
	return f.killErr
}

func (f *fake) lastEvent() api.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		return api.Event{}
	}
	return f.events[len(f.events)-1]
}

func TestCheckRefusesBadSpecsByField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec api.FaultSpec
		want string
		is   error
	}{
		{name: "unknown kind", spec: api.FaultSpec{Kind: "flood"}, want: `unknown kind "flood" (valid: delay-push`, is: api.ErrBadFault},
		{name: "pod given to a lab-wide fault", spec: api.FaultSpec{Kind: api.FaultDiscoveryStop, Pods: []string{"frontend"}, Duration: time.Second}, want: "discovery-stop: takes no pod", is: api.ErrBadFault},
		{name: "no pod", spec: api.FaultSpec{Kind: api.FaultHoldPush}, want: "hold-push: needs a pod (pods with a sidecar: backend, frontend)", is: api.ErrBadFault},
		{name: "two pods to a one-pod fault", spec: api.FaultSpec{Kind: api.FaultNack, Pods: []string{"frontend", "backend"}}, want: "nack: takes exactly one pod, got 2", is: api.ErrBadFault},
		{name: "zero delay", spec: api.FaultSpec{Kind: api.FaultDelayPush, Pods: []string{"frontend"}}, want: "delay-push: needs a delay above zero", is: api.ErrBadFault},
		{name: "stop too long", spec: api.FaultSpec{Kind: api.FaultDiscoveryStop, Duration: 11 * time.Minute}, want: "at most 10m0s", is: api.ErrBadFault},
		{name: "zero offset", spec: api.FaultSpec{Kind: api.FaultCAClock}, want: "ca-clock: needs a non-zero offset", is: api.ErrBadFault},
		{name: "pod twice", spec: api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"frontend", "frontend"}}, want: "pod frontend named twice", is: api.ErrBadFault},
		{name: "unknown pod", spec: api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"nope"}}, want: `add hold-push fault: pod "nope"`, is: api.ErrUnknownPod},
		{name: "pod without a sidecar", spec: api.FaultSpec{Kind: api.FaultKillProxy, Pods: []string{"plain"}}, want: "add kill-proxy fault: pod plain", is: api.ErrNoSidecar},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			var s Set
			_, err := s.Add(context.Background(), f.deps(), tc.spec)
			testutil.CheckErr(t, "Add", err, tc.want)
			if !errors.Is(err, tc.is) {
				t.Fatalf("Add = %v, want %v", err, tc.is)
			}
			if calls := f.takeCalls(); len(calls) != 0 || len(s.List()) != 0 || len(f.events) != 0 {
				t.Fatalf("a refused fault acted: calls %v, faults %v, events %v", calls, s.List(), f.events)
			}
		})
	}
}

// TestFaultsActAndUndo puts each fault that stays in force, checks what it asked of the
// discovery server and the CA, then clears it and checks the undo.
func TestFaultsActAndUndo(t *testing.T) {
	t.Parallel()
	fe, be := "sidecar~10.244.0.2~frontend.default~default.svc.cluster.local", "sidecar~10.244.0.3~backend.default~default.svc.cluster.local"
	for _, tc := range []struct {
		name      string
		spec      api.FaultSpec
		act, undo []string
	}{
		{name: "delay-push", spec: api.FaultSpec{Kind: api.FaultDelayPush, Pods: []string{"frontend", "backend"}, Delay: 3 * time.Second},
			act: []string{"delay " + fe + " 3s", "delay " + be + " 3s"}, undo: []string{"delay " + fe + " 0s", "delay " + be + " 0s"}},
		{name: "hold-push", spec: api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"backend"}},
			act: []string{"hold " + be}, undo: []string{"release " + be}},
		{name: "nack", spec: api.FaultSpec{Kind: api.FaultNack, Pods: []string{"frontend"}},
			act: []string{"nack " + fe + " true"}, undo: []string{"nack " + fe + " false"}},
		{name: "discovery-stop", spec: api.FaultSpec{Kind: api.FaultDiscoveryStop, Duration: time.Minute},
			act: []string{"stop 1m0s"}, undo: []string{"stop 0s"}},
		{name: "ca-clock", spec: api.FaultSpec{Kind: api.FaultCAClock, Offset: -25 * time.Hour},
			act: []string{"ca-clock -25h0m0s"}, undo: []string{"ca-clock 0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			if got := f.model.Pod("frontend").NodeID(); got != fe {
				t.Fatalf("frontend's node id %q, want %q", got, fe)
			}
			var s Set
			ctx := context.Background()
			added, err := s.Add(ctx, f.deps(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.takeCalls(); !slices.Equal(got, tc.act) {
				t.Fatalf("Add asked %q, want %q", got, tc.act)
			}
			if ev := f.lastEvent(); ev.Kind != EventFaultAdded || ev.Fields["id"] != "f1" || ev.Pod != strings.Join(tc.spec.Pods, ",") {
				t.Fatalf("event %+v, want %s of f1", ev, EventFaultAdded)
			}
			if l := s.List(); len(l) != 1 || l[0].ID != added.ID {
				t.Fatalf("List %+v, want %s", l, added.ID)
			}
			// ca-clock names no pod, so Add does not refuse a second one (as before the
			// move); the others are refused while in force.
			if tc.spec.Kind != api.FaultCAClock {
				if _, err := s.Add(ctx, f.deps(), tc.spec); !errors.Is(err, api.ErrFaultExists) {
					t.Fatalf("the same fault again = %v, want ErrFaultExists", err)
				}
			}
			cleared, err := s.Clear(ctx, f.deps(), "f1")
			if err != nil || len(cleared) != 1 || cleared[0].ID != "f1" {
				t.Fatalf("Clear(f1) = %v, %v", cleared, err)
			}
			if got := f.takeCalls(); !slices.Equal(got, tc.undo) {
				t.Fatalf("Clear asked %q, want %q", got, tc.undo)
			}
			if ev := f.lastEvent(); ev.Kind != EventFaultCleared || !strings.HasSuffix(ev.Message, " cleared") {
				t.Fatalf("event %+v, want %s", ev, EventFaultCleared)
			}
			if len(s.List()) != 0 {
				t.Fatalf("List after Clear %+v", s.List())
			}
		})
	}
}

func TestNackThatFailsIsRolledBack(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.nackErr = errors.New("no stream")
	var s Set
	_, err := s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultNack, Pods: []string{"backend"}})
	testutil.CheckErr(t, "Add(nack)", err, "add nack fault on backend: no stream")
	be := f.model.Pod("backend").NodeID()
	if got, want := f.takeCalls(), []string{"nack " + be + " true", "nack " + be + " false"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if len(s.List()) != 0 || len(f.events) != 0 {
		t.Fatal("a failed nack is listed or announced")
	}
}

func TestDiscoveryStopEndsByItself(t *testing.T) {
	t.Parallel()
	f := newFake()
	var s Set
	added, err := s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultDiscoveryStop, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if added.Until == nil || added.Until.Sub(added.Started) != 50*time.Millisecond {
		t.Fatalf("until %v, want started + 50ms", added.Until)
	}
	// expire takes the fault off the list, then publishes its end: wait for both.
	deadline := time.Now().Add(5 * time.Second)
	for len(s.List()) != 0 || f.lastEvent().Kind != EventFaultCleared {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after it ended: listed %v, last event %+v", s.List(), f.lastEvent())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev := f.lastEvent(); ev.Message != "f1: discovery-stop for 50ms ended" {
		t.Fatalf("event %+v, want the end of f1", ev)
	}
}

func TestKillProxyKillsTheNewestLiveEpoch(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.status["frontend"] = agentapi.Status{Epochs: []agentapi.EpochStatus{
		{Epoch: 0, State: agentapi.EpochLive, PID: 100}, {Epoch: 1, State: agentapi.EpochLive, PID: 101}, {Epoch: 2, State: agentapi.EpochStarting, PID: 102},
	}}
	var s Set
	got, err := s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultKillProxy, Pods: []string{"frontend"}})
	if err != nil {
		t.Fatal(err)
	}
	if calls := f.takeCalls(); !slices.Equal(calls, []string{"kill 101"}) {
		t.Fatalf("calls %q, want kill 101", calls)
	}
	if got.Message != "killed proxy epoch 1 (pid 101)" || len(s.List()) != 0 {
		t.Fatalf("fault %+v, list %v: want a one-shot with its message", got, s.List())
	}
	if ev := f.lastEvent(); ev.Message != "f1: kill-proxy frontend: killed proxy epoch 1 (pid 101)" {
		t.Fatalf("event %q", ev.Message)
	}
	f.status["backend"] = agentapi.Status{Epochs: []agentapi.EpochStatus{{Epoch: 0, State: agentapi.EpochStarting, PID: 200}}}
	if _, err := s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultKillProxy, Pods: []string{"backend"}}); !errors.Is(err, api.ErrBadFault) {
		t.Fatalf("kill-proxy without a live epoch = %v, want ErrBadFault", err)
	}
	f.statuses = errors.New("dial agent.sock: refused")
	_, err = s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultKillProxy, Pods: []string{"frontend"}})
	testutil.CheckErr(t, "kill-proxy, agent down", err, "kill proxy of frontend: read agent status: dial agent.sock: refused")
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Fatalf("failed kill-proxy faults killed %q", calls)
	}
}

func TestKillAgentFindsItByCommandLine(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.pids["backend"] = []int{300, 301, 302}
	f.argv[300] = []string{"/usr/local/bin/meshlab", "proxy", "--restart-epoch", "0"}
	f.argv[302] = []string{"/usr/local/bin/meshlab", "agent", "--pod", "backend"}
	var s Set
	got, err := s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultKillAgent, Pods: []string{"backend"}})
	if err != nil {
		t.Fatal(err)
	}
	if calls := f.takeCalls(); !slices.Equal(calls, []string{"kill 302"}) || got.Message != "killed agent (pid 302)" {
		t.Fatalf("calls %q, message %q: want pid 302 killed", calls, got.Message)
	}
	_, err = s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultKillAgent, Pods: []string{"frontend"}})
	testutil.CheckErr(t, "kill-agent, none running", err, "kill agent of frontend: no agent process is running")
	f.killErr = errors.New("operation not permitted")
	_, err = s.Add(context.Background(), f.deps(), api.FaultSpec{Kind: api.FaultKillAgent, Pods: []string{"backend"}})
	testutil.CheckErr(t, "kill-agent, kill fails", err, "kill agent (pid 302) of backend: operation not permitted")
}

func TestClearNamesTheActiveFaults(t *testing.T) {
	t.Parallel()
	f := newFake()
	var s Set
	ctx := context.Background()
	if _, err := s.Clear(ctx, f.deps(), "f9"); !errors.Is(err, api.ErrUnknownFault) || !strings.Contains(err.Error(), "(active: none)") {
		t.Fatalf("Clear(f9) on none = %v", err)
	}
	for _, spec := range []api.FaultSpec{
		{Kind: api.FaultHoldPush, Pods: []string{"frontend"}},
		{Kind: api.FaultHoldPush, Pods: []string{"backend"}},
		{Kind: api.FaultCAClock, Offset: time.Hour},
	} {
		if _, err := s.Add(ctx, f.deps(), spec); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Clear(ctx, f.deps(), "f9")
	testutil.CheckErr(t, "Clear(f9)", err, `unknown fault "f9" (active: f1, f2, f3)`)
	f.takeCalls()
	cleared, err := s.Clear(ctx, f.deps(), "")
	if err != nil || len(cleared) != 3 || len(s.List()) != 0 {
		t.Fatalf("Clear(all) = %v, %v; left %v", cleared, err, s.List())
	}
	if got := f.takeCalls(); len(got) != 3 || got[2] != "ca-clock 0s" {
		t.Fatalf("Clear(all) asked %q", got)
	}
}
