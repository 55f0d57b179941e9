package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"

	"github.com/meshlab/meshlab/internal/testutil"
)

// fakeProxy is an in-process proxy: each Run hands the test a fakeRun to end it.
type fakeProxy struct {
	runs chan fakeRun

	mu     sync.Mutex
	events []string
	at     map[string]time.Time
}

type fakeRun struct {
	epoch int
	exit  chan error
}

var _ proxy = (*fakeProxy)(nil)

func newFakeProxy() *fakeProxy {
	return &fakeProxy{runs: make(chan fakeRun), at: make(map[string]time.Time)}
}

func (f *fakeProxy) record(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	f.at[e] = time.Now()
}

func (f *fakeProxy) Run(epoch int, abort <-chan error, started func(pid int)) error {
	started(1000 + epoch)
	r := fakeRun{epoch: epoch, exit: make(chan error)}
	f.runs <- r
	select {
	case err := <-r.exit:
		f.record(fmt.Sprintf("exit %d", epoch))
		return err
	case <-abort:
		f.record(fmt.Sprintf("abort %d", epoch))
		return nil
	}
}

func (f *fakeProxy) Drain(context.Context) error { f.record("drain"); return nil }
func (f *fakeProxy) Cleanup(epoch int)           { f.record(fmt.Sprintf("cleanup %d", epoch)) }

func (f *fakeProxy) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// fixedState is a serverInfoReader whose proxy is always in one state.
type fixedState adminv3.ServerInfo_State

func (s fixedState) serverInfo(context.Context) (*adminv3.ServerInfo, error) {
	return &adminv3.ServerInfo{State: adminv3.ServerInfo_State(s)}, nil
}

const liveInfo = fixedState(adminv3.ServerInfo_LIVE)

func startManager(t *testing.T, p proxy, drain time.Duration) (*epochManager, context.CancelFunc, chan error) {
	t.Helper()
	m := newEpochManager(p, liveInfo, drain, testutil.Logger(t))
	m.startPollInterval, m.pollInterval = time.Millisecond, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return m, cancel, done
}

func recv(t *testing.T, p *fakeProxy) fakeRun {
	t.Helper()
	select {
	case r := <-p.runs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no proxy started")
		return fakeRun{}
	}
}

func TestEpochManagerShutdownOrder(t *testing.T) {
	p := newFakeProxy()
	const drain = 50 * time.Millisecond
	m, cancel, done := startManager(t, p, drain)
	if r := recv(t, p); r.epoch != 0 {
		t.Fatalf("started epoch %d, want 0", r.epoch)
	}
	eventually(t, "epoch live", func() error {
		if ep, ok := m.newest(); !ok || ep.State != EpochLive || ep.PID != 1000 {
			return fmt.Errorf("newest = %+v %t", ep, ok)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	if got, want := p.recorded(), []string{"drain", "abort 0", "cleanup 0"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if gap := p.at["abort 0"].Sub(p.at["drain"]); gap < drain {
		t.Errorf("aborted %s after draining, want at least the termination drain %s", gap, drain)
	}
	eps, restarts, lastExit := m.snapshot()
	if len(eps) != 1 || eps[0].State != EpochExited || *eps[0].ExitCode != 0 || restarts != 0 || lastExit != "" {
		t.Errorf("after shutdown: %+v restarts=%d lastExit=%q", eps, restarts, lastExit)
	}
}

func TestEpochManagerProxyExitingDuringDrain(t *testing.T) {
	p := newFakeProxy()
	_, cancel, done := startManager(t, p, time.Hour)
	r := recv(t, p)
	cancel()
	eventually(t, "drain requested", func() error {
		if !slices.Contains(p.recorded(), "drain") {
			return errors.New("no drain yet")
		}
		return nil
	})
	r.exit <- nil // the proxy finishes draining and exits by itself: no hour-long wait
	select {
	case <-done:
		done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("manager still waiting for the termination drain")
	}
	if got, want := p.recorded(), []string{"drain", "exit 0", "cleanup 0"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestEpochManagerRestartsWithBackoff(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, time.Millisecond)
	var starts []time.Time
	for i := range 3 {
		r := recv(t, p)
		starts = append(starts, time.Now())
		r.exit <- &exitError{Err: fmt.Errorf("proxy epoch 0 exited: exit status %d", i+1), Stderr: []string{"boom", fmt.Sprint("try ", i)}}
	}
	recv(t, p) // the fourth process stays up
	// Never live before crashing: 100ms, then 200ms between starts.
	if gap := starts[1].Sub(starts[0]); gap < minBackoff {
		t.Errorf("first restart after %s, want >= %s", gap, minBackoff)
	}
	if gap := starts[2].Sub(starts[1]); gap < 2*minBackoff {
		t.Errorf("second restart after %s, want >= %s", gap, 2*minBackoff)
	}
	eps, restarts, lastExit := m.snapshot()
	if restarts != 3 {
		t.Errorf("restarts = %d, want 3", restarts)
	}
	if want := "proxy epoch 0 exited: exit status 3\nboom\ntry 2"; lastExit != want {
		t.Errorf("last exit = %q, want %q", lastExit, want)
	}
	if len(eps) != 4 || eps[3].State == EpochExited || !strings.Contains(eps[2].Error, "exit status 3") {
		t.Errorf("epochs = %+v", eps)
	}
}

func TestEpochManagerKeepsFewExitedEpochs(t *testing.T) {
	m := newEpochManager(newFakeProxy(), liveInfo, 0, testutil.Logger(t))
	for i := range 8 {
		m.epochs = append(m.epochs, &EpochStatus{Epoch: i, State: EpochExited})
	}
	m.epochs = append(m.epochs, &EpochStatus{Epoch: 8, State: EpochLive})
	m.trimLocked()
	var got []int
	for _, e := range m.epochs {
		got = append(got, e.Epoch)
	}
	if want := []int{4, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Errorf("kept epochs %v, want %v", got, want)
	}
}

func TestLineTail(t *testing.T) {
	lt := newLineTail(3)
	fmt.Fprint(lt, "a\nb\n")
	fmt.Fprint(lt, "c\nd")
	fmt.Fprint(lt, "e\nf")
	if got, want := lt.Lines(), []string{"c", "de", "f"}; !slices.Equal(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
	lt = newLineTail(2)
	lt.Write([]byte(strings.Repeat("x", 2*maxLineLen) + "\n"))
	if got := lt.Lines(); len(got) != 1 || len(got[0]) != maxLineLen {
		t.Errorf("long line kept as %d bytes, want %d", len(got[0]), maxLineLen)
	}
}
