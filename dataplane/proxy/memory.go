package proxy

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/meshlab/meshlab/dataplane/startgc"
)

// Why the proxy hands memory back to the OS itself.
//
// An idle sidecar's live heap is about 6 MB (measured on the hello lab): ~4.5 MB are
// protobuf descriptors and MessageInfos built lazily while the bootstrap and the first
// xDS responses are decoded, ~1 MB the package inits of the whole meshlab binary, the
// rest its config. With GOGC=200 (tuneGC) the heap goal is three times that, ~18 MB,
// and an idle proxy still allocates (the agent polls /server_info, ~40 KB a request),
// so its heap creeps towards the goal; Go's scavenger only returns pages above the goal
// and its forced GC runs every two minutes, so the pages stay resident. When the proxy
// is idle a collection costs a few milliseconds, so it collects and returns the free
// pages then; under load it never does, and GOGC=200 keeps its throughput.
const (
	// trimPeriod is how often the proxy looks at its allocation rate.
	trimPeriod = 30 * time.Second
	// trimIdleBytes: a period that allocated less than this is idle (~12 KB a request:
	// about 10 requests a second).
	trimIdleBytes = 4 << 20
	// trimMinGarbage: trim only once this much was allocated since the last trim, so an
	// idle proxy that allocates nothing is left alone.
	trimMinGarbage = 1 << 20
	// startupGCPauseMax: a proxy not LIVE this long after it started (waiting for xDS
	// that does not come) gets its steady-state GC anyway.
	startupGCPauseMax = 10 * time.Second
)

// memTrimmer returns the proxy's free heap to the OS once the initial configuration is
// applied (startup's garbage: decoded bootstrap, xDS responses), and again after each
// idle period. The OS access is behind two funcs so that tests can fake them.
type memTrimmer struct {
	allocated func() uint64 // bytes allocated since the process started
	free      func()        // collect and return free memory to the OS
	period    time.Duration
	idle      uint64 // a period allocating fewer bytes is idle
	minGarb   uint64 // fewer bytes allocated since the last trim: nothing to trim
	tick      func(time.Duration) (<-chan time.Time, func())
	// untilBusy is startgc.UntilBusy: while the process is idle, a channel closed once it
	// is busy again; nil while it is not idle.
	untilBusy func() <-chan struct{}
	// started is optional: called once, when live is closed or after startupWait,
	// whichever comes first (tuneGC's end of the start-up GC pause).
	started     func()
	startupWait time.Duration
}

// newMemTrimmer returns a trimmer over the Go runtime.
func newMemTrimmer() *memTrimmer {
	return &memTrimmer{
		allocated:   heapAllocated,
		free:        debug.FreeOSMemory,
		period:      trimPeriod,
		startupWait: startupGCPauseMax,
		idle:        trimIdleBytes,
		minGarb:     trimMinGarbage,
		tick: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
		untilBusy: startgc.UntilBusy,
	}
}

// run calls started and trims once live is closed, then trims after every idle period,
// until ctx ends. started is called after startupWait if live is not closed by then.
// While the process's collector is off for idleness (startgc) the memory limit bounds
// its heap and there is nothing to trim: the trimmer stops ticking until the process is
// busy again. Its tick was the one timer left waking an idle proxy besides the agent's
// readiness poll, every 30 s for nothing, where an idle Envoy's timers are its stats
// flush and the like (docs/BENCHMARKS.md, issue 30's idle wake-ups).
func (m *memTrimmer) run(ctx context.Context, live <-chan struct{}) {
	once := false
	started := func() {
		if m.started != nil && !once {
			m.started()
		}
		once = true
	}
	var late <-chan time.Time
	if m.startupWait > 0 {
		t := time.NewTimer(m.startupWait)
		defer t.Stop()
		late = t.C
	}
	for live != nil {
		select {
		case <-ctx.Done():
			return
		case <-late:
			started()
			late = nil
		case <-live:
			live = nil
		}
	}
	started()
	m.free()
	st := trimState{lastTrim: m.allocated()}
	st.prev = st.lastTrim
	c, stop := m.tick(m.period)
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
		}
		if busy := m.untilBusy(); busy != nil {
			stop()
			select {
			case <-ctx.Done():
				return
			case <-busy:
			}
			c, stop = m.tick(m.period)
			st.prev = m.allocated() // a period starts now: what the idle stretch allocated is not its
			continue
		}
		if m.due(&st, m.allocated()) {
			m.free()
			st.trimmed(m.allocated())
		}
	}
}

// trimState is what the trimmer remembers between periods: the allocation counter at
// the end of the last period and after the last trim.
type trimState struct {
	prev, lastTrim uint64
}

// due reports whether a period that ended with the allocation counter at now was idle
// and followed enough allocation since the last trim to be worth a trim.
func (m *memTrimmer) due(st *trimState, now uint64) bool {
	idle := now-st.prev < m.idle
	st.prev = now
	return idle && now-st.lastTrim >= m.minGarb
}

// trimmed records a trim that left the allocation counter at now.
func (st *trimState) trimmed(now uint64) { st.prev, st.lastTrim = now, now }

// heapAllocated reads the runtime's cumulative heap allocation counter (runtime/metrics
// does not stop the world, unlike runtime.ReadMemStats).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
