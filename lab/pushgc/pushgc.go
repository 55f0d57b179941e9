// Package pushgc keeps the lab process's garbage collector off while the lab pushes
// config to the proxies, and gives it back once pushes are quiet.
//
// Why: at 100 sidecars a VirtualService apply is ~1 ms of generation, then 100 stream
// sends and 100 ACKs that the lab's two Ps share with 100 proxies waking on the same two
// cores. The lab allocates ~2.5 MB per apply (its live heap is ~25 MB), so with Go's
// default trigger a collection starts every ~8 applies, wherever the heap crosses its
// goal, and one that starts during a push's fan-out takes one of the lab's Ps and slows
// the rest with assists for 40-55 ms: the slowest applies of BenchmarkApplyConvergence
// were those with a collection inside their push (docs/BENCHMARKS.md, issue 30, ninth
// pass). istiod runs on cores of its own, away from the sidecars; here the lab collects
// when it is not pushing.
//
// While a push runs, and for Quiet after the last one ends (its responses go out and its
// ACKs come back in that time), GOGC is off under a memory limit of twice the live heap
// plus minHeadroom over what the runtime holds besides the heap, so a series of pushes
// that never pauses still collects when it has allocated that much. Then GOGC and the
// limit are put back as they were, and the collection that came due during the pushes
// runs, with GOGC still off (no assists) when it came due. A process started with
// GOGC=off is left alone.
package pushgc

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	// Quiet is how long after the last push ends the collector stays off: a push to 100
	// proxies is ACKed ~40-60 ms after the lab has handed out its responses.
	Quiet = 100 * time.Millisecond
	// minHeadroom is the least a held collector lets the heap grow by.
	minHeadroom = 64 << 20
)

// std is the process's collector, which Hold holds.
var std = &holder{
	setPercent: debug.SetGCPercent,
	setLimit:   debug.SetMemoryLimit,
	heap:       heapNow,
	other:      otherMemory,
	collect:    runtime.GC,
	afterFunc:  func(d time.Duration, f func()) { time.AfterFunc(d, f) },
	quiet:      Quiet,
}

// Hold turns the collector off for a push that starts now and returns the func that
// says the push ended; the collector comes back Quiet after the last push held ends.
// It is safe for concurrent use; release is idempotent.
func Hold() (release func()) { return std.hold() }

// holder is the collector's state across pushes; the runtime is behind funcs for tests.
type holder struct {
	setPercent func(int) int
	setLimit   func(int64) int64
	heap       func() (live, objects int64) // the heap marked live by the last collection; the heap's objects now
	other      func() int64                 // all the runtime holds besides the heap's objects
	collect    func()                       // a full collection
	afterFunc  func(time.Duration, func())
	quiet      time.Duration

	mu        sync.Mutex
	running   int    // pushes held now
	gen       uint64 // counts holds: a quiet timer of an older one does nothing
	held      bool   // the collector is off
	percent   int    // GOGC before the hold
	limit     int64  // the memory limit before the hold
	heldLimit int64  // the limit set while held
	userGCOff bool   // GOGC was off before any hold: leave the collector alone
}

func (h *holder) hold() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running++
	h.gen++
	if !h.held && !h.userGCOff {
		prev := h.setPercent(-1)
		if prev < 0 { // GOGC=off from the environment: not ours to give back
			h.userGCOff = true
		} else {
			h.held, h.percent = true, prev
			h.limit = h.setLimit(-1)
			h.heldLimit = 0
		}
	}
	if h.held {
		live, _ := h.heap()
		other := h.other()
		// The live heap grows with the lab (a push during `up` of many pods): the limit
		// follows it, never the garbage, so a long series of pushes still collects.
		if want := other + 2*live + max(minHeadroom, live); want > h.heldLimit {
			h.heldLimit = min(want, h.limit)
			h.setLimit(h.heldLimit)
		}
	}
	var once sync.Once
	return func() { once.Do(h.release) }
}

// release ends one push; the last one arms the quiet timer.
func (h *holder) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running--
	if h.running > 0 || !h.held {
		return
	}
	gen := h.gen
	h.afterFunc(h.quiet, func() { h.resume(gen) })
}

// resume puts the collector back if no push was held since the timer of gen was armed.
// When the pushes used more than 60 % of the heap's runway under GOGC (what it may grow
// by past the live heap before the goal), it collects first, with GOGC still off: put
// back over a heap past its trigger (Go's lies between 70 and 95 % of the runway), the
// collector would start at the next allocation, the next apply's, and make it assist.
func (h *holder) resume(gen uint64) {
	h.mu.Lock()
	if gen != h.gen || h.running > 0 || !h.held {
		h.mu.Unlock()
		return
	}
	live, objects := h.heap()
	percent := h.percent
	h.mu.Unlock()
	if objects > live+live*int64(percent)*6/1000 {
		h.collect()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen || h.running > 0 || !h.held {
		return // a push began during the collection: the collector stays off for it
	}
	h.held = false
	h.setLimit(h.limit)
	h.setPercent(h.percent)
}

// heapNow reads the live heap of the last collection and the heap's objects now,
// without stopping the world (runtime/metrics).
func heapNow() (live, objects int64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return sampleInt(s[0]), sampleInt(s[1])
}

// otherMemory is what the memory limit counts besides the heap's objects: all the
// runtime mapped, less what it released and the objects.
func otherMemory() int64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	return max(0, sampleInt(s[0])-sampleInt(s[1])-sampleInt(s[2]))
}

func sampleInt(s metrics.Sample) int64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(min(s.Value.Uint64(), math.MaxInt64))
}
