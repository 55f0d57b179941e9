// Package podview answers the lab's pod list (`meshlab status`, `get pods`, the dashboard)
// from what the lab already holds, asking a pod's agent only when what the lab holds of
// it may be out of date.
//
// A sidecar's agent status (ready, epoch, data plane, restarts, message) changes only when
// its proxy does: an epoch starts, goes live, drains, exits or crashes. Each of those shows
// on the lab's event bus first, as the discovery server's xds.connected or
// xds.disconnected of the pod's proxy, or the supervisor's process events of its agent.
// So a status that is settled (ready, every epoch live or exited) is held until an event
// names its pod; a status that is not settled is never held and is asked again on every
// list. The request counters move with traffic, which no event announces: meshlab-proxy
// adds every request to a file of the pod's that the lab reads (dataplane/rqtotals), and
// an Envoy is asked for its stats each time.
package podview

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// Deps is what the view needs of the lab: its pods' agents.
type Deps interface {
	// AgentStatus is the pod agent's /status.
	AgentStatus(ctx context.Context, pod string) (agentapi.Status, error)
	// AgentUsedStats is the pod proxy's counters and gauges whose names match the RE2
	// filter, leaving out those never used.
	AgentUsedStats(ctx context.Context, pod, filter string) (map[string]uint64, error)
	// RequestTotals reads the request totals meshlab-proxy keeps in the pod's run
	// directory (dataplane/rqtotals), without asking the proxy.
	RequestTotals(pod string) (out, in uint64, err error)
}

// Parallel bounds how many agents List asks at once, and Timeout is how long one agent
// has to answer, counted from when it is asked. Asking every agent at once with one
// deadline made `meshlab status` of a 500-pod lab on 2 cores report 280 of them "agent
// unreachable: context deadline exceeded": 1000 requests woke 1000 processes on two
// cores, and most did not run within 2 s.
const (
	Parallel = 16
	Timeout  = 2 * time.Second
)

// requestCounters are the stats whose sums are PodStatus.RequestsOut and RequestsIn.
const requestCounters = `^cluster\.(outbound|inbound)\|.*\.upstream_rq_total$`

// View holds the settled agent status of each sidecar pod. The zero value is ready to
// use; it is safe for concurrent use.
type View struct {
	mu sync.Mutex
	// gen counts the events that named a pod, by the name the event used (a pod's key,
	// or its name in the discovery server's events); connected counts the
	// xds.connected among them.
	gen, connected map[string]uint64
	held           map[string]held // by pod key
}

// held is one pod's settled status and the event counts it was read under.
type held struct {
	st              agentStatus
	genKey, genName uint64
}

// agentStatus is the part of an agent's status a PodStatus shows.
type agentStatus struct {
	ready     bool
	epoch     int
	dataPlane string
	restarts  int
	message   string
}

// The kinds of the lab's bus events Changed tells apart (lab/events.go and
// controlplane/discovery's; this package does not import them).
const (
	kindPushed    = "xds.pushed"
	kindACK       = "xds.ack"
	kindConnected = "xds.connected"
	kindPodReady  = "pod.ready"
)

// Changed records an event of the lab's bus: a status held for pod (a key or a name, or
// several joined by commas as a fault names its pods) is dropped, unless the event is one
// that cannot change it: a push or its ACK (a proxy's readiness moves with its first ACK
// only, and a status not yet ready is never held), or pod.ready, which the lab publishes
// once its own wait has read the pod ready: that read is what Before offers, and dropping
// it made the first list after `up` ask every agent again.
func (v *View) Changed(kind, pod string) {
	if pod == "" || kind == kindPushed || kind == kindACK || kind == kindPodReady {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen == nil {
		v.gen, v.connected = map[string]uint64{}, map[string]uint64{}
	}
	for p := range strings.SplitSeq(pod, ",") {
		v.gen[p]++
		if kind == kindConnected {
			v.connected[p]++
		}
	}
}

// Fill completes the sidecar pods of pods (Sidecar set; Name and Key filled) with their
// agent's status and their proxy's request counters, asking at most Parallel agents at
// a time. Other pods are left as they are. pods is the lab's every pod: held statuses of
// pods not in it are dropped.
func (v *View) Fill(ctx context.Context, d Deps, pods []api.PodStatus) {
	v.prune(pods)
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i := range pods {
		if !pods[i].Sidecar {
			continue
		}
		wg.Add(1)
		go func(ps *api.PodStatus) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			v.fill(ctx, d, ps)
		}(&pods[i])
	}
	wg.Wait()
}

// Before returns the func that offers a status the pod's agent answers after this call
// (the lab's wait for a starting pod to be ready), so that the first list after `up`
// asks no agent. key and name are the pod's.
//
// The wait is a long poll that a starting proxy's own stream opening falls in: the agent
// answers ready after the proxy's first ACK, which follows its xds.connected. So the
// offered status is held if the events that named the pod meanwhile are at most that one
// xds.connected; any other event (a stream closed, a process exited, a second stream: a
// new epoch) may have come after the agent's answer, and the status is asked again by
// the next list. Holding only when no event came at all (as one Fill read is held) held
// no pod's: every wait saw its proxy connect. The one stream may also be a new epoch's
// opened after the agent answered (its first epoch connected before the wait began): the
// status held then is the old epoch's until that epoch's stream closes, an event that
// drops it, as a restart's drain ends.
func (v *View) Before(key, name string) func(agentapi.Status) {
	ps := &api.PodStatus{Key: key, Name: name}
	v.mu.Lock()
	then := v.countsOf(key, name)
	v.mu.Unlock()
	return func(st agentapi.Status) {
		if !settled(st) {
			return
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		now := v.countsOf(key, name)
		conns := now.connected - then.connected
		if now.events()-then.events() != conns || conns > 1 {
			return
		}
		v.holdLocked(ps, fromAgent(st), now.key, now.name)
	}
}

// podCounts is what the events that named one pod have counted, by its key and its name.
type podCounts struct {
	key, name uint64
	connected uint64 // xds.connected by either
	same      bool   // key and name are one string: one count
}

// events is how many events named the pod.
func (c podCounts) events() uint64 {
	if c.same {
		return c.key
	}
	return c.key + c.name
}

// countsOf reads the counts of a pod's key and name; v.mu is held.
func (v *View) countsOf(key, name string) podCounts {
	c := podCounts{key: v.gen[key], name: v.gen[name], connected: v.connected[key], same: key == name}
	if !c.same {
		c.connected += v.connected[name]
	}
	return c
}

// FillPod completes one sidecar pod as Fill does.
func (v *View) FillPod(ctx context.Context, d Deps, ps *api.PodStatus) { v.fill(ctx, d, ps) }

func (v *View) fill(ctx context.Context, d Deps, ps *api.PodStatus) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	st, ok, genKey, genName := v.lookup(ps)
	if !ok {
		full, err := d.AgentStatus(ctx, ps.Key)
		if err != nil {
			ps.Message = "agent unreachable: " + err.Error()
			return
		}
		st = fromAgent(full)
		if settled(full) {
			v.hold(ps, st, genKey, genName)
		}
	}
	ps.Ready, ps.Epoch, ps.DataPlane, ps.Restarts, ps.Message = st.ready, st.epoch, st.dataPlane, st.restarts, st.message
	if st.dataPlane == agentapi.DataPlaneMeshlabProxy {
		if out, in, err := d.RequestTotals(ps.Key); err == nil {
			ps.RequestsOut, ps.RequestsIn = out, in
			return
		}
	}
	// Envoy's counters, asked for: only those ever used, since a sidecar of a large lab
	// has tens of thousands of stats and matching every name took it ~60 ms
	// (BenchmarkStatusStats).
	stats, err := d.AgentUsedStats(ctx, ps.Key, requestCounters)
	if err != nil {
		ps.Message = "stats unavailable: " + err.Error()
		return
	}
	ps.RequestsOut, ps.RequestsIn = 0, 0
	for name, n := range stats {
		switch {
		case strings.HasPrefix(name, "cluster.outbound|"):
			ps.RequestsOut += n
		case strings.HasPrefix(name, "cluster.inbound|"):
			ps.RequestsIn += n
		}
	}
}

// lookup returns the status held for ps, if still current, and the event counts of its
// key and name now (to hold a status read after this call under).
func (v *View) lookup(ps *api.PodStatus) (st agentStatus, ok bool, genKey, genName uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	genKey, genName = v.gen[ps.Key], v.gen[ps.Name]
	h, ok := v.held[ps.Key]
	if !ok || h.genKey != genKey || h.genName != genName {
		return agentStatus{}, false, genKey, genName
	}
	return h.st, true, genKey, genName
}

// hold keeps st for ps unless an event named the pod since genKey and genName were read:
// the status may have been read before that event's change.
func (v *View) hold(ps *api.PodStatus, st agentStatus, genKey, genName uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen[ps.Key] != genKey || v.gen[ps.Name] != genName {
		return
	}
	v.holdLocked(ps, st, genKey, genName)
}

// holdLocked keeps st for ps under the event counts genKey and genName; v.mu is held.
func (v *View) holdLocked(ps *api.PodStatus, st agentStatus, genKey, genName uint64) {
	if v.held == nil {
		v.held = map[string]held{}
	}
	v.held[ps.Key] = held{st: st, genKey: genKey, genName: genName}
}

// prune drops what is held of pods no longer listed (a pod deleted by an apply).
func (v *View) prune(pods []api.PodStatus) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.held) == 0 {
		return
	}
	listed := make(map[string]bool, len(pods))
	for _, ps := range pods {
		listed[ps.Key] = true
	}
	for key := range v.held {
		if !listed[key] {
			delete(v.held, key)
		}
	}
}

// fromAgent is the part of st a PodStatus shows; the epoch is the newest live one, -1
// when none is.
func fromAgent(st agentapi.Status) agentStatus {
	out := agentStatus{ready: st.Ready, epoch: -1, dataPlane: st.DataPlane, restarts: st.Restarts, message: st.Message}
	for _, e := range st.Epochs {
		if e.State == agentapi.EpochLive && e.Epoch > out.epoch {
			out.epoch = e.Epoch
		}
	}
	return out
}

// settled reports whether st can be held until an event names its pod: the pod is ready
// with a proxy of its own, and no epoch is starting or draining (each of those ends with
// no event of the bus: a draining epoch's stream may already be closed).
func settled(st agentapi.Status) bool {
	if !st.Ready || st.Failed || st.Proxyless != nil || st.DataPlane == agentapi.DataPlaneProxyless {
		return false
	}
	live := 0
	for _, e := range st.Epochs {
		switch e.State {
		case agentapi.EpochLive:
			live++
		case agentapi.EpochExited:
		default:
			return false
		}
	}
	return live == 1
}
