package lab

import (
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/lab/observe"
	"github.com/meshlab/meshlab/web"
)

// Event kinds the lab publishes. Other parts (xDS pushes, ACK/NACK, config applies) add
// their own kinds through Lab.publish; kinds are "<subject>.<verb>".
const (
	EventLabUp        = "lab.up"
	EventLabDown      = "lab.down"
	EventPodCreated   = "pod.created"
	EventPodReady     = "pod.ready"
	EventPodFailed    = "pod.failed"              // its proxy failed or was not ready in time while the lab came up
	EventProcStarted  = "process.started"         // an agent or app was started (Fields: role, pid)
	EventProcExited   = "process.exited"          // it exited unexpectedly (Fields: role, pid, error)
	EventProcRestart  = "process.restarted"       // the supervisor started it again
	EventEpochChanged = observe.EventEpochChanged // a proxy epoch changed state (seen while the dashboard watches)
	EventPushFailed   = "config.push-failed"      // an applied change's proxy config could not be generated (Fields: error, trigger)
)

// defaultHistory is how many events the bus retains for late subscribers.
const defaultHistory = 1000

// Bus is the lab's in-process event bus: Publish never blocks, every subscriber gets its
// own bounded buffer, and the most recent events are kept for subscribers that arrive
// later. Safe for concurrent use.
type Bus struct {
	mu      sync.Mutex
	now     func() time.Time
	seq     uint64
	ring    []api.Event // the last len(ring) events, oldest at head once cap(ring) is reached
	head    int
	subs    map[*subscriber]struct{}
	dropped uint64
}

type subscriber struct {
	ch chan api.Event
}

var _ web.EventSource = (*Bus)(nil)

// NewBus returns a bus retaining the last history events (at least 1).
func NewBus(history int) *Bus {
	return newBus(history, time.Now)
}

func newBus(history int, now func() time.Time) *Bus {
	history = max(history, 1)
	return &Bus{now: now, ring: make([]api.Event, 0, history), subs: map[*subscriber]struct{}{}}
}

// Publish numbers e, stamps it (unless it carries a time), retains it and hands it to
// every subscriber. A subscriber whose buffer is full is cut off: its channel is closed
// so that it re-subscribes from the last event it saw instead of silently missing some.
func (b *Bus) Publish(e api.Event) api.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	e.Fields = maps.Clone(e.Fields)
	if len(b.ring) < cap(b.ring) {
		b.ring = append(b.ring, e)
	} else {
		b.ring[b.head] = e
		b.head = (b.head + 1) % len(b.ring)
	}
	for s := range b.subs {
		select {
		case s.ch <- e:
		default:
			close(s.ch)
			delete(b.subs, s)
			b.dropped++
		}
	}
	return e
}

// Recent returns the retained events, oldest first.
func (b *Bus) Recent() []api.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recentAfter(0)
}

func (b *Bus) recentAfter(after uint64) []api.Event {
	out := make([]api.Event, 0, len(b.ring))
	for i := range b.ring {
		e := b.ring[(b.head+i)%len(b.ring)]
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out
}

// Subscribe implements web.EventSource.
func (b *Bus) Subscribe(after uint64, buffer int) ([]api.Event, <-chan api.Event, func()) {
	s := &subscriber{ch: make(chan api.Event, max(buffer, 1))}
	b.mu.Lock()
	history := b.recentAfter(after)
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if _, ok := b.subs[s]; ok {
				delete(b.subs, s)
				close(s.ch)
			}
		})
	}
	return history, s.ch, cancel
}

// Subscribers returns how many subscriptions are open.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// CutOff returns how many subscribers were cut off for falling behind.
func (b *Bus) CutOff() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// publish puts one event on the lab's bus. It is the one call every part of the lab uses
// (pods, supervisor, and later xDS pushes, ACK/NACK, config applies): kind is
// "<subject>.<verb>", pod may be empty, fields are copied.
func (l *Lab) publish(kind, pod, msg string, fields map[string]any) {
	l.podview.Changed(kind, pod) // what it holds of pod may be out of date now
	if l.bus == nil {
		return
	}
	l.bus.Publish(api.Event{Kind: kind, Pod: pod, Message: msg, Fields: fields})
	if e, ok := policyEvent(kind, msg, fields); ok {
		l.bus.Publish(e)
	}
}

// publishXDS turns a discovery server event into a bus event of the pod whose proxy it
// concerns. It runs under the discovery server's lock and must not block; Publish never does.
func (l *Lab) publishXDS(e discovery.Event) {
	if l.metrics != nil {
		l.metrics.observe(e)
	}
	fields := map[string]any{"node": e.NodeID}
	msg := ""
	if e.TypeURL != "" {
		short := e.TypeURL[strings.LastIndex(e.TypeURL, ".")+1:]
		fields["type"], fields["version"] = short, e.Version
		msg = short + " " + e.Version
	}
	switch {
	case e.Kind == discovery.EventPushError:
		fields["version"], fields["error"] = e.Version, e.Error
		msg = "config " + e.Version + " not generated, the proxy keeps its previous config: " + e.Error
	case e.Error != "":
		fields["error"] = e.Error
		msg += ": " + e.Error
	}
	l.publish(e.Kind, podOfNode(e.NodeID), strings.TrimSpace(msg), fields)
}

// podOfNode returns the pod name in an Istio-shaped node id
// ("sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local"), or "" for another shape.
func podOfNode(id string) string {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return ""
	}
	pod, _, _ := strings.Cut(parts[2], ".")
	return pod
}
