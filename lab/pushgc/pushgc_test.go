package pushgc

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// fakeRuntime is the collector's settings and the quiet timers, recorded.
type fakeRuntime struct {
	percent      int
	limit        int64
	live, other  int64
	objects      int64
	timers       []func()
	percentCalls int
	collections  int
}

func (f *fakeRuntime) holder() *holder {
	return &holder{
		setPercent: func(p int) int { old := f.percent; f.percent = p; f.percentCalls++; return old },
		setLimit: func(l int64) int64 {
			old := f.limit
			if l >= 0 {
				f.limit = l
			}
			return old
		},
		heap:      func() (int64, int64) { return f.live, f.objects },
		other:     func() int64 { return f.other },
		collect:   func() { f.collections++; f.objects = f.live },
		afterFunc: func(_ time.Duration, fn func()) { f.timers = append(f.timers, fn) },
		quiet:     Quiet,
	}
}

// fire runs the quiet timers armed so far, oldest first.
func (f *fakeRuntime) fire() {
	ts := f.timers
	f.timers = nil
	for _, fn := range ts {
		fn()
	}
}

// TestHoldStates walks the collector through pushes: off under a limit while a push
// runs, still off after it ends until the quiet timer fires, back as it was then; a
// push that starts before the timer fires keeps it off (the stale timer does nothing);
// overlapping pushes are one hold; the limit follows the live heap, never down.
func TestHoldStates(t *testing.T) {
	t.Parallel()
	f := &fakeRuntime{percent: 100, limit: math.MaxInt64, live: 25 << 20, other: 10 << 20}
	h := f.holder()
	wantLimit := int64(10<<20 + 2*25<<20 + minHeadroom)

	release := h.hold()
	if f.percent != -1 || f.limit != wantLimit {
		t.Fatalf("during a push: GOGC %d limit %d, want off under %d", f.percent, f.limit, wantLimit)
	}
	release()
	release() // idempotent
	if f.percent != -1 || len(f.timers) != 1 {
		t.Fatalf("a push ended: GOGC %d, %d quiet timers; want off until the timer fires, one timer", f.percent, len(f.timers))
	}
	f.fire()
	if f.percent != 100 || f.limit != math.MaxInt64 || f.collections != 0 {
		t.Fatalf("quiet: GOGC %d limit %d, %d collections; want 100 and no limit back, no collection (none was due)", f.percent, f.limit, f.collections)
	}

	// A push right after another: the first one's timer fires during the second.
	r1 := h.hold()
	r1()
	f.live = 200 << 20 // the lab grew (pods added)
	r2 := h.hold()
	r3 := h.hold() // overlapping
	f.fire()
	if f.percent != -1 {
		t.Fatalf("a stale quiet timer turned the collector back on during a push (GOGC %d)", f.percent)
	}
	if want := int64(10<<20 + 2*200<<20 + 200<<20); f.limit != want {
		t.Fatalf("limit %d after the live heap grew, want %d", f.limit, want)
	}
	f.live = 1 << 20
	r4 := h.hold()
	if want := int64(10<<20 + 2*200<<20 + 200<<20); f.limit != want {
		t.Fatalf("limit %d after the live heap shrank, want it kept at %d", f.limit, want)
	}
	r2()
	r3()
	if len(f.timers) != 0 {
		t.Fatalf("%d quiet timers armed while a push still runs", len(f.timers))
	}
	r4()
	f.objects = f.live + f.live*65/100 // 65 % of GOGC 100's runway: its trigger is near
	f.fire()
	if f.percent != 100 || f.limit != math.MaxInt64 || f.collections != 1 {
		t.Fatalf("after the last push: GOGC %d limit %d, %d collections; want them back after one collection", f.percent, f.limit, f.collections)
	}
	h.hold()()
	f.objects = f.live + f.live*55/100 // 55 %: the trigger is still ahead
	f.fire()
	if f.percent != 100 || f.collections != 1 {
		t.Fatalf("GOGC %d, %d collections after a push that used 55 %% of the runway, want 100 and no new collection", f.percent, f.collections)
	}
}

// TestHoldDuringTheCollection: a push that begins while resume collects keeps the
// collector off; its own end brings it back.
func TestHoldDuringTheCollection(t *testing.T) {
	t.Parallel()
	f := &fakeRuntime{percent: 100, limit: math.MaxInt64, live: 10 << 20, objects: 40 << 20}
	h := f.holder()
	var during func()
	h.collect = func() { f.collections++; f.objects = f.live; during = h.hold() }
	h.hold()()
	f.fire()
	if f.collections != 1 || f.percent != -1 {
		t.Fatalf("%d collections, GOGC %d: want one, and the collector off for the push that began during it", f.collections, f.percent)
	}
	h.collect = func() { f.collections++ }
	during()
	f.fire()
	if f.percent != 100 || f.limit != math.MaxInt64 {
		t.Fatalf("after that push: GOGC %d limit %d, want them back", f.percent, f.limit)
	}
}

// TestHoldKeepsAMemoryLimitSet: a limit set before (GOMEMLIMIT) caps the held one and is
// put back.
func TestHoldKeepsAMemoryLimitSet(t *testing.T) {
	t.Parallel()
	f := &fakeRuntime{percent: 200, limit: 80 << 20, live: 25 << 20, other: 10 << 20}
	h := f.holder()
	r := h.hold()
	if f.percent != -1 || f.limit != 80<<20 {
		t.Fatalf("held: GOGC %d limit %d, want off under the limit set before (%d)", f.percent, f.limit, 80<<20)
	}
	r()
	f.fire()
	if f.percent != 200 || f.limit != 80<<20 {
		t.Fatalf("after: GOGC %d limit %d, want 200 and %d", f.percent, f.limit, 80<<20)
	}
}

// TestHoldLeavesGOGCOff: a process whose collector was off before any hold (GOGC=off) is
// left so.
func TestHoldLeavesGOGCOff(t *testing.T) {
	t.Parallel()
	f := &fakeRuntime{percent: -1, limit: math.MaxInt64}
	h := f.holder()
	r := h.hold()
	r()
	f.fire()
	h.hold()()
	f.fire()
	if f.percent != -1 || f.limit != math.MaxInt64 || f.percentCalls != 1 {
		t.Fatalf("GOGC %d limit %d after %d SetGCPercent calls, want off, no limit, and one call (that found it off)", f.percent, f.limit, f.percentCalls)
	}
}

// TestHoldOnTheRuntime holds the process's own collector: no collection starts while a
// push allocates many times the default trigger, and the one due runs once the hold is
// released. Not parallel: it owns the process's GC settings.
func TestHoldOnTheRuntime(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	runtime.GC()
	numGC := func() uint32 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NumGC
	}
	before := numGC()
	h := &holder{
		setPercent: debug.SetGCPercent, setLimit: debug.SetMemoryLimit, heap: heapNow, other: otherMemory,
		collect: runtime.GC, afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }, quiet: 10 * time.Millisecond,
	}
	release := h.hold()
	var sink []byte
	for range 24 { // 24 MB of garbage: many times this test's heap goal, within minHeadroom
		sink = make([]byte, 1<<20)
	}
	if n := numGC() - before; n != 0 {
		t.Fatalf("%d collections during the hold, want none", n)
	}
	release()
	deadline := time.Now().Add(5 * time.Second)
	for numGC() == before || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		if time.Now().After(deadline) {
			t.Fatalf("5s after the hold was released: %d collections, memory limit %d; want the due one and no limit", numGC()-before, debug.SetMemoryLimit(-1))
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = sink
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC %d after the hold, want 100 back", got)
	}
}
