package startgc

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Why an idle process turns its collector off.
//
// An idle sidecar's agent and proxy allocate little (a state poll every 15 s), yet Go
// collects every two minutes whatever the heap did: that forced collection, marking the
// large binary's globals and a heap of 6-12 MB, was most of what 100 idle sidecar pods
// cost (docs/BENCHMARKS.md, issue 30). Go skips it when GOGC is off. So once a process's
// collections come more than idleAfter apart, it sets GOGC off with a memory limit of
// what it holds now plus idleHeadroom: the next collection comes when it has allocated
// that much, and its memory stays within it. A collection that then follows the last
// within busyWithin (the process allocates idleHeadroom a second or more) puts back the
// steady state. After each idle collection the limit follows what the process holds.
//
// An idle process also runs its Go code on one thread (GOMAXPROCS 1; busy puts back
// what it had, a proxy's --concurrency): a proxy applying a pushed route configuration
// hands its goroutines to each other, and with a second P idle every hand-off woke
// another thread to spin looking for work, a fifth of the 100 proxies' CPU per
// VirtualService apply in a `perf record` (docs/BENCHMARKS.md, issue 30).
const (
	idleHeadroom = 4 << 20
	idleAfter    = 60 * time.Second
	busyWithin   = time.Second
)

// idling is set while the process's collector is off for idleness.
var idling idleFlag

// UntilBusy returns, while the process's collector is off because it is idle, a channel
// closed once it is busy again; nil while it is not idle. The proxy's memory trimmer
// leaves an idle heap to the memory limit and waits on it instead of ticking: each tick
// would wake an idle process for nothing.
func UntilBusy() <-chan struct{} { return idling.untilBusy() }

// idleFlag is whether the process is idle, with a channel that is closed when it stops
// being idle. Safe for concurrent use.
type idleFlag struct {
	on   atomic.Bool
	mu   sync.Mutex
	busy chan struct{} // made when idleness begins, closed when it ends
}

// Load reports whether the process is idle.
func (f *idleFlag) Load() bool { return f.on.Load() }

// Store sets whether the process is idle; leaving idleness closes the channel
// untilBusy returned.
func (f *idleFlag) Store(idle bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on.Load() == idle {
		return
	}
	if idle {
		f.busy = make(chan struct{})
	} else {
		close(f.busy)
	}
	f.on.Store(idle)
}

// untilBusy returns a channel closed once the process stops being idle, nil when it is
// not idle.
func (f *idleFlag) untilBusy() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on.Load() {
		return nil
	}
	return f.busy
}

// idleGC switches a process's collector between its steady state and idle; the
// runtime's side is behind funcs for tests.
type idleGC struct {
	steady     int
	now        func() time.Time
	setPercent func(int) int
	setLimit   func(int64) int64
	inUse      func() int64  // what the memory limit counts: the runtime's memory not released
	idle       *idleFlag     // set while the collector is off
	setProcs   func(int) int // runtime.GOMAXPROCS; nil leaves it alone
	procs      int           // GOMAXPROCS when busy

	mu   sync.Mutex
	last time.Time // the end of the last collection (or the start)
}

// adaptWhenIdle starts switching the collector with every collection from now on, and
// GOMAXPROCS too when procs is set.
func adaptWhenIdle(steady int, procs bool) {
	g := &idleGC{steady: steady, now: time.Now, setPercent: debug.SetGCPercent, setLimit: debug.SetMemoryLimit, inUse: memoryInUse, idle: &idling}
	if procs {
		g.setProcs = runtime.GOMAXPROCS
	}
	g.last = g.now()
	g.arm()
}

// arm has cycle called after the next collection: a finalizer on an object nothing
// references runs once a collection found it unreachable.
func (g *idleGC) arm() {
	runtime.SetFinalizer(new([32]byte), func(*[32]byte) {
		g.cycle()
		g.arm()
	})
}

// cycle decides after a collection whether the process is idle.
func (g *idleGC) cycle() {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	since := now.Sub(g.last)
	g.last = now
	switch {
	case g.idle.Load() && since < busyWithin:
		g.idle.Store(false)
		g.setPercent(g.steady)
		g.setLimit(math.MaxInt64)
		if g.setProcs != nil && g.procs > 1 {
			g.setProcs(g.procs)
		}
	case g.idle.Load():
		g.setLimit(g.inUse() + idleHeadroom)
	case since >= idleAfter:
		g.idle.Store(true)
		g.setLimit(g.inUse() + idleHeadroom)
		g.setPercent(-1)
		if g.setProcs != nil {
			if g.procs = g.setProcs(1); g.procs < 1 {
				g.procs = 1
			}
		}
	}
}

// memoryInUse is the memory the runtime's limit counts: all it mapped, less what it
// returned to the OS.
func memoryInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
