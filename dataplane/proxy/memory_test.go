package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeHeap is the runtime as the memTrimmer sees it: an allocation counter the test
// advances, a free func that counts its calls, and a ticker the test drives.
type fakeHeap struct {
	allocated atomic.Uint64
	frees     chan struct{}
	ticks     chan time.Time
	tickers   chan string // "start" and "stop" of the trimmer's ticker, in order
	busy      atomic.Pointer[chan struct{}]
}

func newFakeTrimmer() (*memTrimmer, *fakeHeap) {
	h := &fakeHeap{frees: make(chan struct{}, 16), ticks: make(chan time.Time), tickers: make(chan string, 16)}
	m := &memTrimmer{
		allocated: h.allocated.Load,
		free:      func() { h.frees <- struct{}{} },
		period:    time.Second,
		idle:      4 << 20,
		minGarb:   1 << 20,
		tick: func(time.Duration) (<-chan time.Time, func()) {
			h.tickers <- "start"
			return h.ticks, func() { h.tickers <- "stop" }
		},
		untilBusy: func() <-chan struct{} {
			if b := h.busy.Load(); b != nil {
				return *b
			}
			return nil
		},
	}
	return m, h
}

// expectTicker waits (with a deadline) for the trimmer's ticker to start or stop.
func (h *fakeHeap) expectTicker(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-h.tickers:
		if got != want {
			t.Fatalf("ticker %s, want %s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no ticker %s", want)
	}
}

// expectFree waits (with a deadline) for one call of free.
func (h *fakeHeap) expectFree(t *testing.T, why string) {
	t.Helper()
	select {
	case <-h.frees:
	case <-time.After(5 * time.Second):
		t.Fatalf("no trim: %s", why)
	}
}

func TestMemTrimmerFreesOnceLiveThenOnATick(t *testing.T) {
	m, h := newFakeTrimmer()
	ctx, cancel := context.WithCancel(context.Background())
	live := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.run(ctx, live) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	select {
	case <-h.frees:
		t.Fatal("trimmed before the server went LIVE")
	case <-time.After(20 * time.Millisecond):
	}
	close(live)
	h.expectFree(t, "the initial configuration is applied (server LIVE)")
	h.allocated.Add(2 << 20)
	h.ticks <- time.Now()
	h.expectFree(t, "an idle period after 2 MB of garbage")
}

// An idle proxy (its collector off under a memory limit, startgc) is not woken by the
// trimmer: at the first tick that finds it idle the ticker stops, and starts again only
// once the process is busy.
func TestMemTrimmerDoesNotTickWhileIdle(t *testing.T) {
	m, h := newFakeTrimmer()
	ctx, cancel := context.WithCancel(context.Background())
	live := make(chan struct{})
	close(live)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.run(ctx, live) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	h.expectFree(t, "server LIVE")
	h.expectTicker(t, "start")

	busy := make(chan struct{})
	h.busy.Store(&busy)
	h.allocated.Add(2 << 20) // garbage that would be trimmed were the process not idle
	h.ticks <- time.Now()
	h.expectTicker(t, "stop")
	select {
	case <-h.frees:
		t.Fatal("trimmed an idle process, whose heap the memory limit bounds")
	case ev := <-h.tickers:
		t.Fatalf("ticker %s while the process is idle", ev)
	case h.ticks <- time.Now():
		t.Fatal("the trimmer took a tick while idle")
	case <-time.After(50 * time.Millisecond):
	}

	h.busy.Store(nil)
	close(busy)
	h.expectTicker(t, "start")
	h.ticks <- time.Now()
	h.expectFree(t, "the first quiet period once busy again, with the 2 MB of garbage")
}

func TestMemTrimmerTrimsOnlyIdlePeriodsWithGarbage(t *testing.T) {
	m, _ := newFakeTrimmer() // idle: < 4 MB a period; worth it: >= 1 MB since the last trim
	st := trimState{}
	var now uint64
	for _, step := range []struct {
		name      string
		allocated uint64
		want      bool
	}{
		{"idle, only 100 KB since the last trim", 100 << 10, false},
		{"idle, 1.1 MB of garbage since the last trim", 1 << 20, true},
		{"idle, nothing allocated since the last trim", 0, false},
		{"busy: 50 MB in one period (the GC's own pacing applies)", 50 << 20, false},
		{"busy again", 5 << 20, false},
		{"the first idle period after load", 2 << 20, true},
		{"idle after that trim", 300 << 10, false},
	} {
		now += step.allocated
		got := m.due(&st, now)
		if got != step.want {
			t.Errorf("%s: trim %v, want %v", step.name, got, step.want)
		}
		if got {
			st.trimmed(now)
		}
	}
}

func TestMemTrimmerStopsWithItsContext(t *testing.T) {
	m, _ := newFakeTrimmer()
	for _, live := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan struct{})
		if live {
			close(ch)
		}
		done := make(chan struct{})
		go func() { defer close(done); m.run(ctx, ch) }()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("trimmer (live=%v) did not stop with its context", live)
		}
	}
}

func TestHeapAllocatedCountsAllocations(t *testing.T) {
	before := heapAllocated()
	sink := make([][]byte, 0, 64)
	for range 64 {
		sink = append(sink, make([]byte, 64<<10))
	}
	if after := heapAllocated(); after-before < 4<<20 || len(sink) != 64 {
		t.Errorf("heapAllocated grew by %d bytes after 4 MB of allocations", after-before)
	}
}

func TestTrimMemoryStopsAndWaits(t *testing.T) {
	live := make(chan struct{})
	close(live)
	stop := trimMemory(context.Background(), live, nil)
	stop() // returns only once the goroutine is gone (goleak checks at TestMain's end)
}

// started (the end of the start-up GC pause) is called once the server is LIVE, before
// the first trim; or after startupWait when it never goes LIVE, and only once.
func TestMemTrimmerCallsStartedOnLiveOrLate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		startupWait time.Duration
		goLive      bool
	}{
		{name: "live", startupWait: time.Hour, goLive: true},
		{name: "never live", startupWait: 10 * time.Millisecond},
		{name: "late, then live", startupWait: 10 * time.Millisecond, goLive: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, h := newFakeTrimmer()
			calls := make(chan struct{}, 4)
			m.started = func() { calls <- struct{}{} }
			m.startupWait = tc.startupWait
			ctx, cancel := context.WithCancel(context.Background())
			live := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); m.run(ctx, live) }()
			t.Cleanup(func() { cancel(); wg.Wait() })

			if tc.startupWait < time.Second {
				select {
				case <-calls:
				case <-time.After(5 * time.Second):
					t.Fatal("started not called after startupWait")
				}
			} else {
				select {
				case <-calls:
					t.Fatal("started called before the server went LIVE")
				case <-time.After(20 * time.Millisecond):
				}
			}
			if !tc.goLive {
				return
			}
			close(live)
			h.expectFree(t, "the server went LIVE")
			want := 1 // called on LIVE, before the trim
			if tc.startupWait < time.Second {
				want = 0 // already called when late
			}
			if n := len(calls); n != want {
				t.Errorf("started called %d more times by the first trim, want %d", n, want)
			}
		})
	}
}
