package startgc

import (
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleGCSwitches walks idleGC through a process's life: collections a few seconds
// apart keep the steady state; one more than idleAfter after the last turns the
// collector off under a limit of what the process holds plus idleHeadroom; the limit
// follows each idle collection; a collection within busyWithin of the last puts the
// steady state back.
func TestIdleGCSwitches(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	percent, limit, inUse, procs := 200, int64(math.MaxInt64), int64(10<<20), 2
	g := &idleGC{
		steady: 200, now: func() time.Time { return now },
		setPercent: func(p int) int { old := percent; percent = p; return old },
		setLimit:   func(l int64) int64 { old := limit; limit = l; return old },
		inUse:      func() int64 { return inUse },
		idle:       new(idleFlag),
		setProcs:   func(n int) int { old := procs; procs = n; return old },
		last:       now,
	}
	step := func(d time.Duration) {
		now = now.Add(d)
		g.cycle()
	}
	step(5 * time.Second)
	if percent != 200 || limit != math.MaxInt64 || g.idle.Load() {
		t.Fatalf("busy: percent %d limit %d idle %v, want the steady state", percent, limit, g.idle.Load())
	}
	step(2 * time.Minute) // Go's forced collection: nothing happened for two minutes
	if percent != -1 || limit != inUse+idleHeadroom || !g.idle.Load() || procs != 1 {
		t.Fatalf("after an idle stretch: percent %d limit %d idle %v procs %d, want off under %d on one P", percent, limit, g.idle.Load(), procs, inUse+idleHeadroom)
	}
	inUse = 12 << 20
	step(10 * time.Minute)
	if percent != -1 || limit != inUse+idleHeadroom {
		t.Fatalf("an idle collection: percent %d limit %d, want off under %d", percent, limit, inUse+idleHeadroom)
	}
	step(300 * time.Millisecond)
	if percent != 200 || limit != math.MaxInt64 || g.idle.Load() || procs != 2 {
		t.Fatalf("collections 300ms apart: percent %d limit %d idle %v procs %d, want the steady state back (2 Ps)", percent, limit, g.idle.Load(), procs)
	}
}

// TestIdleGCRunsAfterEveryCollection: arm's finalizer hook runs cycle after each
// collection, again and again.
func TestIdleGCRunsAfterEveryCollection(t *testing.T) {
	var cycles atomic.Int32
	g := &idleGC{
		steady: 100, now: func() time.Time { cycles.Add(1); return time.Now() },
		setPercent: func(int) int { return 100 }, setLimit: func(int64) int64 { return math.MaxInt64 },
		inUse: func() int64 { return 0 }, idle: new(idleFlag), last: time.Now(),
	}
	g.arm()
	for want := int32(1); want <= 3; want++ {
		deadline := time.Now().Add(10 * time.Second)
		for cycles.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d cycles after %d collections", cycles.Load(), want)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestUntilBusyClosesWhenIdlenessEnds: the channel a waiter takes while the process is
// idle stays open through idle collections and closes once it is busy again; a busy
// process has none to wait on.
func TestUntilBusyClosesWhenIdlenessEnds(t *testing.T) {
	t.Parallel()
	var f idleFlag
	if f.untilBusy() != nil {
		t.Fatal("a busy process returned a channel to wait on")
	}
	f.Store(true)
	busy := f.untilBusy()
	if busy == nil {
		t.Fatal("an idle process returned no channel")
	}
	f.Store(true) // an idle collection: still idle, the same wait
	if f.untilBusy() != busy {
		t.Fatal("staying idle replaced the channel a waiter holds")
	}
	select {
	case <-busy:
		t.Fatal("the channel closed while the process was still idle")
	default:
	}
	f.Store(false)
	select {
	case <-busy:
	default:
		t.Fatal("the channel stayed open after the process became busy")
	}
	if f.untilBusy() != nil {
		t.Fatal("a busy-again process returned a channel")
	}
	f.Store(true)
	if next := f.untilBusy(); next == nil || next == busy {
		t.Fatal("a second idle stretch did not get a new channel")
	}
}
