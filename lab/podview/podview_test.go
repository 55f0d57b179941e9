package podview

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// fakeAgents answers as the pods' agents and counts the status requests.
type fakeAgents struct {
	mu       sync.Mutex
	status   map[string]agentapi.Status
	asked    map[string]int
	requests map[string]uint64    // inbound upstream_rq_total
	totals   map[string][2]uint64 // the rqtotals file: out, in; none: no file
	stats    map[string]int       // stats requests
	onAsk    func(pod string)     // runs while a status request is answered
}

func (f *fakeAgents) RequestTotals(pod string) (out, in uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.totals[pod]
	if !ok {
		return 0, 0, errors.New("no such file")
	}
	return t[0], t[1], nil
}

func (f *fakeAgents) AgentStatus(_ context.Context, pod string) (agentapi.Status, error) {
	f.mu.Lock()
	f.asked[pod]++
	st, ok := f.status[pod]
	hook := f.onAsk
	f.mu.Unlock()
	if hook != nil {
		hook(pod)
	}
	if !ok {
		return agentapi.Status{}, errors.New("no agent")
	}
	return st, nil
}

func (f *fakeAgents) AgentUsedStats(_ context.Context, pod, _ string) (map[string]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stats == nil {
		f.stats = map[string]int{}
	}
	f.stats[pod]++
	return map[string]uint64{"cluster.inbound|8080||.upstream_rq_total": f.requests[pod], "cluster.outbound|8080||b.default.svc.cluster.local.upstream_rq_total": 1}, nil
}

func live(epoch int) agentapi.Status {
	return agentapi.Status{Ready: true, DataPlane: agentapi.DataPlaneMeshlabProxy, Epochs: []agentapi.EpochStatus{{Epoch: epoch, State: agentapi.EpochLive}}}
}

func list(names ...string) []api.PodStatus {
	var out []api.PodStatus
	for _, n := range names {
		out = append(out, api.PodStatus{Name: n, Namespace: "default", Key: n, Sidecar: true, Epoch: -1})
	}
	return out
}

// TestViewHoldsSettledStatusUntilAnEventNamesThePod holds View to its contract: a ready
// pod's agent is asked once until an event names the pod (by key or by the name the
// discovery server's events use); a pod not settled is asked on every list; the request
// counters are read every time.
func TestViewHoldsSettledStatusUntilAnEventNamesThePod(t *testing.T) {
	t.Parallel()
	f := &fakeAgents{
		status: map[string]agentapi.Status{
			"a": live(0),
			"b": {Ready: false, Message: "not ready: proxy epoch 0 is starting", Epochs: []agentapi.EpochStatus{{Epoch: 0, State: agentapi.EpochStarting}}},
			"c": {Ready: true, DataPlane: agentapi.DataPlaneMeshlabProxy, Epochs: []agentapi.EpochStatus{{Epoch: 0, State: agentapi.EpochDraining}, {Epoch: 1, State: agentapi.EpochLive}}},
		},
		asked: map[string]int{}, requests: map[string]uint64{"a": 3},
	}
	var v View
	for range 3 {
		v.Fill(t.Context(), f, list("a", "b", "c"))
	}
	if f.asked["a"] != 1 || f.asked["b"] != 3 || f.asked["c"] != 3 {
		t.Fatalf("agents asked %v, want a once (settled), b and c on every list (starting, draining)", f.asked)
	}
	f.mu.Lock()
	f.status["a"] = live(1)
	f.requests["a"] = 7
	f.mu.Unlock()
	got := list("a")
	v.Fill(t.Context(), f, got)
	if got[0].Epoch != 0 || got[0].RequestsIn != 7 || got[0].RequestsOut != 1 {
		t.Fatalf("a = %+v, want the held epoch 0 with the counters read now (in 7, out 1)", got[0])
	}
	v.Changed("xds.ack", "a") // a push's ACK changes no agent status
	v.Fill(t.Context(), f, got)
	if f.asked["a"] != 1 {
		t.Fatalf("a asked %d times after an ACK, want 1", f.asked["a"])
	}
	v.Changed("xds.connected", "a")
	v.Fill(t.Context(), f, got)
	if f.asked["a"] != 2 || got[0].Epoch != 1 || !got[0].Ready {
		t.Fatalf("after xds.connected: a asked %d times, status %+v; want asked again, epoch 1", f.asked["a"], got[0])
	}
	v.Changed("fault.added", "b,a") // a fault names its pods joined by commas
	v.Fill(t.Context(), f, got)
	if f.asked["a"] != 3 {
		t.Fatalf("a asked %d times after a fault named it, want 3", f.asked["a"])
	}
}

// TestViewDoesNotHoldAStatusAnEventOvertook: an event that arrives while the agent is
// being asked may mean the answer is already old, so it is not held.
func TestViewDoesNotHoldAStatusAnEventOvertook(t *testing.T) {
	t.Parallel()
	var v View
	f := &fakeAgents{status: map[string]agentapi.Status{"a": live(0)}, asked: map[string]int{}, requests: map[string]uint64{}}
	f.onAsk = func(pod string) { v.Changed("xds.disconnected", pod) }
	v.Fill(t.Context(), f, list("a"))
	f.onAsk = nil
	v.Fill(t.Context(), f, list("a"))
	v.Fill(t.Context(), f, list("a"))
	if f.asked["a"] != 2 {
		t.Fatalf("a asked %d times, want 2: the first answer, overtaken by an event, is not held", f.asked["a"])
	}
}

// TestViewForgetsDeletedPods: a pod no longer listed loses what was held of it, so a pod
// made again under the same key is asked.
func TestViewForgetsDeletedPods(t *testing.T) {
	t.Parallel()
	var v View
	f := &fakeAgents{status: map[string]agentapi.Status{"a": live(0), "b": live(0)}, asked: map[string]int{}, requests: map[string]uint64{}}
	v.Fill(t.Context(), f, list("a", "b"))
	v.Fill(t.Context(), f, list("b"))
	v.Fill(t.Context(), f, list("a", "b"))
	if f.asked["a"] != 2 || f.asked["b"] != 1 {
		t.Fatalf("asked %v, want a twice (listed again after it was gone), b once", f.asked)
	}
	got := list("x")
	v.Fill(t.Context(), f, got)
	if got[0].Ready || got[0].Message != "agent unreachable: no agent" {
		t.Fatalf("x = %+v, want not ready, agent unreachable", got[0])
	}
}

// TestViewReadsMeshlabProxyTotalsFromTheFile: a meshlab-proxy pod's counters come from
// its request totals file, without a request to its agent; an Envoy's, or a pod whose
// file cannot be read, from its stats.
func TestViewReadsMeshlabProxyTotalsFromTheFile(t *testing.T) {
	t.Parallel()
	envoy := live(0)
	envoy.DataPlane = agentapi.DataPlaneEnvoy
	f := &fakeAgents{
		status:   map[string]agentapi.Status{"a": live(0), "b": envoy, "c": live(0)},
		asked:    map[string]int{},
		requests: map[string]uint64{"b": 4, "c": 5},
		totals:   map[string][2]uint64{"a": {11, 12}, "b": {99, 99}},
	}
	var v View
	got := list("a", "b", "c")
	v.Fill(t.Context(), f, got)
	v.Fill(t.Context(), f, got)
	if got[0].RequestsOut != 11 || got[0].RequestsIn != 12 || f.stats["a"] != 0 {
		t.Errorf("a = out %d in %d after %d stats requests, want 11 and 12 from the file, none asked", got[0].RequestsOut, got[0].RequestsIn, f.stats["a"])
	}
	if got[1].RequestsIn != 4 || f.stats["b"] != 2 {
		t.Errorf("b (Envoy) = in %d after %d stats requests, want 4 from its stats, asked each time", got[1].RequestsIn, f.stats["b"])
	}
	if got[2].RequestsIn != 5 || f.stats["c"] != 2 {
		t.Errorf("c (no file) = in %d after %d stats requests, want 5 from its stats", got[2].RequestsIn, f.stats["c"])
	}
	if f.asked["a"] != 1 || f.asked["b"] != 1 {
		t.Errorf("statuses asked %v, want a and b once", f.asked)
	}
}

// TestViewHoldsWhatTheReadyWaitRead: a status offered through Before (the lab's wait for
// a starting pod) is held, so the first list asks no agent, when the events that named
// the pod during the wait are at most its proxy's stream opening (the agent answers ready
// after it) and what came after the offer is the lab's pod.ready; any other event during
// the wait, or after the offer, makes the list ask.
func TestViewHoldsWhatTheReadyWaitRead(t *testing.T) {
	t.Parallel()
	type event struct{ kind, pod string }
	for _, tc := range []struct {
		name          string
		key, podName  string // the pod's key and the name the discovery server's events use
		during, after []event
		held          bool
	}{
		{name: "no event", key: "a", podName: "a", held: true},
		{name: "its stream opened, then pod.ready", key: "a", podName: "a",
			during: []event{{"xds.connected", "a"}, {"xds.pushed", "a"}, {"xds.ack", "a"}}, after: []event{{"pod.ready", "a"}}, held: true},
		{name: "its stream opened by name, pod.ready by key", key: "a.ns", podName: "a",
			during: []event{{"xds.connected", "a"}}, after: []event{{"pod.ready", "a.ns"}}, held: true},
		{name: "its stream closed", key: "a", podName: "a",
			during: []event{{"xds.connected", "a"}, {"xds.disconnected", "a"}}},
		{name: "a second stream (a new epoch)", key: "a", podName: "a",
			during: []event{{"xds.connected", "a"}, {"xds.connected", "a"}}},
		{name: "two streams, one by key and one by name", key: "a.ns", podName: "a",
			during: []event{{"xds.connected", "a"}, {"xds.connected", "a.ns"}}},
		{name: "its agent restarted", key: "a.ns", podName: "a",
			during: []event{{"process.restarted", "a.ns"}}},
		{name: "a fault named it among others", key: "a", podName: "a",
			during: []event{{"fault.injected", "b,a"}}},
		{name: "its stream closed after the offer", key: "a", podName: "a",
			during: []event{{"xds.connected", "a"}}, after: []event{{"pod.ready", "a"}, {"xds.disconnected", "a"}}},
		{name: "another pod's events", key: "a", podName: "a",
			during: []event{{"xds.connected", "b"}, {"xds.disconnected", "b"}, {"process.exited", "ab"}}, held: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v View
			f := &fakeAgents{status: map[string]agentapi.Status{tc.key: live(1)}, asked: map[string]int{}, requests: map[string]uint64{},
				totals: map[string][2]uint64{tc.key: {1, 2}}}
			v.Changed("xds.connected", tc.podName) // an earlier wait's: counts before Before do not matter
			offer := v.Before(tc.key, tc.podName)
			for _, e := range tc.during {
				v.Changed(e.kind, e.pod)
			}
			offer(live(0))
			for _, e := range tc.after {
				v.Changed(e.kind, e.pod)
			}
			got := []api.PodStatus{{Name: tc.podName, Namespace: "ns", Key: tc.key, Sidecar: true, Epoch: -1}}
			v.Fill(t.Context(), f, got)
			wantAsked, wantEpoch := 1, 1
			if tc.held {
				wantAsked, wantEpoch = 0, 0
			}
			if f.asked[tc.key] != wantAsked || got[0].Epoch != wantEpoch || !got[0].Ready || got[0].RequestsIn != 2 {
				t.Errorf("agent asked %d times, pod %+v; want asked %d times, epoch %d, ready with 2 requests in (held: %v)",
					f.asked[tc.key], got[0], wantAsked, wantEpoch, tc.held)
			}
		})
	}
}
