package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"

	"github.com/meshlab/meshlab/internal/testutil"
)

// fakeProxy is an in-process proxy: each Run hands the test a fakeRun to end it. It is
// also the manager's serverInfoReader: like Envoy's, its admin port belongs to the newest
// running epoch, which answers with its own state and restart epoch.
type fakeProxy struct {
	runs     chan fakeRun
	autoLive bool // a started epoch reports LIVE at once

	mu     sync.Mutex
	events []string
	at     map[string]time.Time
	states map[int]adminv3.ServerInfo_State // running epochs
}

type fakeRun struct {
	epoch    int
	settings agentapi.ProxySettings
	exit     chan error
}

var (
	_ proxy            = (*fakeProxy)(nil)
	_ serverInfoReader = (*fakeProxy)(nil)
)

func newFakeProxy() *fakeProxy {
	return &fakeProxy{runs: make(chan fakeRun), autoLive: true, at: make(map[string]time.Time),
		states: make(map[int]adminv3.ServerInfo_State)}
}

func (f *fakeProxy) record(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	f.at[e] = time.Now()
}

func (f *fakeProxy) setState(epoch int, s adminv3.ServerInfo_State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[epoch] = s
}

func (f *fakeProxy) setAutoLive(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.autoLive = v
}

func (f *fakeProxy) serverInfo(context.Context) (*adminv3.ServerInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	owner := -1
	for e := range f.states {
		owner = max(owner, e)
	}
	if owner < 0 {
		return nil, errors.New("connection refused")
	}
	return &adminv3.ServerInfo{State: f.states[owner],
		CommandLineOptions: &adminv3.CommandLineOptions{RestartEpoch: uint32(owner)}}, nil
}

func (f *fakeProxy) Run(epoch int, s agentapi.ProxySettings, abort <-chan error, started func(processInfo)) error {
	f.mu.Lock()
	state := adminv3.ServerInfo_PRE_INITIALIZING
	if f.autoLive {
		state = adminv3.ServerInfo_LIVE
	}
	f.states[epoch] = state
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.states, epoch)
		f.mu.Unlock()
	}()
	f.record(fmt.Sprintf("start %d", epoch))
	started(processInfo{PID: 1000 + epoch, Path: "/fake/envoy", Version: "fake 1.0", DataPlane: agentapi.DataPlaneEnvoy})
	r := fakeRun{epoch: epoch, settings: s, exit: make(chan error)}
	f.runs <- r
	select {
	case err := <-r.exit:
		f.record(fmt.Sprintf("exit %d", epoch))
		return err
	case why := <-abort:
		f.record(fmt.Sprintf("abort %d: %v", epoch, why))
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

var baseSettings = agentapi.ProxySettings{LogLevel: "info", Concurrency: 2, DrainDuration: agentapi.Duration(time.Second), ParentShutdownDuration: agentapi.Duration(2 * time.Second)}

func startManager(t *testing.T, p *fakeProxy, drain time.Duration, tune ...func(*epochManager)) (*epochManager, context.CancelFunc, chan error) {
	t.Helper()
	m := newEpochManager(p, p, baseSettings, drain, testutil.Logger(t))
	m.startPollInterval, m.pollInterval = time.Millisecond, time.Millisecond
	for _, f := range tune {
		f(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		// End whatever the test left running, then wait for Run.
		for {
			select {
			case <-p.runs: // Run's shutdown aborts it
				continue
			case <-done:
			}
			return
		}
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

// noStart fails if a proxy starts within d.
func noStart(t *testing.T, p *fakeProxy, d time.Duration) {
	t.Helper()
	select {
	case r := <-p.runs:
		t.Fatalf("epoch %d started, want none", r.epoch)
	case <-time.After(d):
	}
}

// restartAsync calls Restart in a goroutine and returns its result channel.
func restartAsync(m *epochManager, s *agentapi.ProxySettings) chan agentapi.RestartResult {
	out := make(chan agentapi.RestartResult, 1)
	go func() {
		r, err := m.Restart(context.Background(), s)
		if err != nil {
			r = agentapi.RestartResult{Epoch: -2}
		}
		out <- r
	}()
	return out
}

func waitLive(t *testing.T, m *epochManager, epoch int) {
	t.Helper()
	eventually(t, fmt.Sprintf("epoch %d live", epoch), func() error {
		if st, _, ok := m.serving(); !ok || st.Epoch != epoch || st.State != agentapi.EpochLive {
			return fmt.Errorf("serving = %+v %t", st, ok)
		}
		return nil
	})
}

func TestEpochManagerShutdownOrder(t *testing.T) {
	p := newFakeProxy()
	const drain = 50 * time.Millisecond
	m, cancel, done := startManager(t, p, drain)
	if r := recv(t, p); r.epoch != 0 || r.settings != baseSettings {
		t.Fatalf("started epoch %d with %+v, want 0 with the base settings", r.epoch, r.settings)
	}
	waitLive(t, m, 0)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	if got, want := p.recorded(), []string{"start 0", "drain", "abort 0: epoch aborted", "cleanup 0"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if gap := p.at["abort 0: epoch aborted"].Sub(p.at["drain"]); gap < drain {
		t.Errorf("aborted %s after draining, want at least the termination drain %s", gap, drain)
	}
	s := m.snapshot()
	if len(s.epochs) != 1 || s.epochs[0].State != agentapi.EpochExited || *s.epochs[0].ExitCode != 0 || s.restarts != 0 || s.lastExit != "" ||
		s.epochs[0].Reason != agentapi.ReasonInitial || s.epochs[0].ProxyVersion != "fake 1.0" {
		t.Errorf("after shutdown: %+v", s)
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
	if got, want := p.recorded(), []string{"start 0", "drain", "exit 0", "cleanup 0"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestEpochManagerRestartsWithBackoff(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	var starts []time.Time
	for i := range 3 {
		r := recv(t, p)
		if r.epoch != 0 {
			t.Fatalf("start %d is epoch %d, want 0: no parent is left after a crash", i, r.epoch)
		}
		starts = append(starts, time.Now())
		if i > 0 {
			if s := m.snapshot(); s.nextRestart != nil || s.failures != i {
				t.Errorf("after restart %d: next restart %v, failures %d", i, s.nextRestart, s.failures)
			}
		}
		r.exit <- &exitError{Err: fmt.Errorf("proxy epoch 0 exited: exit status %d", i+1), Stderr: []string{"boom", fmt.Sprint("try ", i)}}
	}
	recv(t, p) // the fourth process stays up
	// Never live long before crashing: 100ms, then 200ms between starts.
	if gap := starts[1].Sub(starts[0]); gap < minBackoff {
		t.Errorf("first restart after %s, want >= %s", gap, minBackoff)
	}
	if gap := starts[2].Sub(starts[1]); gap < 2*minBackoff {
		t.Errorf("second restart after %s, want >= %s", gap, 2*minBackoff)
	}
	s := m.snapshot()
	if s.restarts != 3 || s.failed {
		t.Errorf("restarts = %d failed = %t, want 3, false", s.restarts, s.failed)
	}
	if want := "proxy epoch 0 exited: exit status 3\nboom\ntry 2"; s.lastExit != want {
		t.Errorf("last exit = %q, want %q", s.lastExit, want)
	}
	if len(s.epochs) != 4 || s.epochs[3].State == agentapi.EpochExited || !strings.Contains(s.epochs[2].Error, "exit status 3") ||
		s.epochs[3].Reason != agentapi.ReasonCrash {
		t.Errorf("epochs = %+v", s.epochs)
	}
}

func TestEpochManagerCrashLoopFailsThePod(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0, func(m *epochManager) { m.budget = 2 })
	for i := range 3 { // the first run and two restarts
		recv(t, p).exit <- &exitError{Err: errors.New("proxy epoch 0 exited: exit status 1"), Stderr: []string{fmt.Sprint("stderr ", i)}}
	}
	eventually(t, "pod failed", func() error {
		if !m.snapshot().failed {
			return errors.New("not failed yet")
		}
		return nil
	})
	noStart(t, p, 300*time.Millisecond) // more than the next backoff (400ms would be the 3rd)
	s := m.snapshot()
	if !strings.Contains(s.lastExit, "3 times in a row") || !strings.HasSuffix(s.lastExit, "stderr 2") || s.nextRestart != nil {
		t.Errorf("failed pod: %+v", s)
	}
	// meshlab proxy restart tries again, from epoch 0, and clears the failure.
	res := restartAsync(m, nil)
	if r := recv(t, p); r.epoch != 0 {
		t.Errorf("restart of a failed pod started epoch %d, want 0", r.epoch)
	}
	if r := <-res; r.Epoch != 0 || !r.Restarted {
		t.Errorf("restart result %+v", r)
	}
	if s := m.snapshot(); s.failed || s.failures != 0 {
		t.Errorf("after a manual restart: failed %t failures %d", s.failed, s.failures)
	}
}

func TestEpochManagerUnstartableProxyFailsAtOnce(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	recv(t, p).exit <- &startError{Err: errors.New(`start proxy epoch 0: fork/exec /nope/envoy: no such file or directory`)}
	eventually(t, "pod failed", func() error {
		if s := m.snapshot(); !s.failed || !strings.Contains(s.lastExit, "proxy cannot be started: start proxy epoch 0: fork/exec /nope/envoy") {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
	noStart(t, p, 2*minBackoff)
}

func TestEpochManagerRestartIsANoOpForEqualSettings(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	recv(t, p)
	waitLive(t, m, 0)
	same := baseSettings
	same.LogLevel = "" // a zero field means the default: still equal
	if r := <-restartAsync(m, &same); r.Restarted || r.Epoch != -1 {
		t.Errorf("restart with equal settings = %+v, want a no-op", r)
	}
	noStart(t, p, 50*time.Millisecond)

	changed := baseSettings
	changed.LogLevel = "debug"
	res := restartAsync(m, &changed)
	r := recv(t, p)
	if r.epoch != 1 || r.settings.LogLevel != "debug" {
		t.Errorf("new epoch %d with %+v, want epoch 1 at debug", r.epoch, r.settings)
	}
	if got := <-res; got.Epoch != 1 || !got.Restarted {
		t.Errorf("result %+v", got)
	}
	if s := m.snapshot(); s.settings.LogLevel != "debug" || s.epochs[1].Reason != agentapi.ReasonConfig {
		t.Errorf("snapshot %+v", s)
	}
	if _, err := m.Restart(context.Background(), &agentapi.ProxySettings{LogLevel: "loud"}); err == nil || !strings.Contains(err.Error(), `log level "loud"`) {
		t.Errorf("invalid settings: err = %v", err)
	}
}

func TestEpochManagerRestartWaitsForLiveParent(t *testing.T) {
	p := newFakeProxy()
	p.setAutoLive(false)
	m, _, _ := startManager(t, p, 0)
	recv(t, p) // epoch 0, initializing
	res := restartAsync(m, nil)
	res2 := restartAsync(m, nil) // a second request while the first waits joins it
	noStart(t, p, 100*time.Millisecond)
	p.setState(0, adminv3.ServerInfo_LIVE)
	if r := recv(t, p); r.epoch != 1 {
		t.Fatalf("started epoch %d, want 1", r.epoch)
	}
	for _, ch := range []chan agentapi.RestartResult{res, res2} {
		if r := <-ch; r.Epoch != 1 {
			t.Errorf("restart result %+v, want epoch 1", r)
		}
	}
	noStart(t, p, 50*time.Millisecond) // one epoch for both requests
	// The parent serves until the child is live, then drains.
	if st, restarting, _ := m.serving(); st.Epoch != 0 || !restarting {
		t.Errorf("serving epoch %d (restarting %t), want the live parent 0", st.Epoch, restarting)
	}
	p.setState(1, adminv3.ServerInfo_LIVE)
	waitLive(t, m, 1)
	eventually(t, "parent draining", func() error {
		if s := m.snapshot(); s.epochs[0].State != agentapi.EpochDraining {
			return fmt.Errorf("parent is %s", s.epochs[0].State)
		}
		return nil
	})
}

// A parent that crashes while it drains does not disturb its live child: no restart, no
// failure counted.
func TestEpochManagerParentCrashDuringDrain(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	r0 := recv(t, p)
	waitLive(t, m, 0)
	restartAsync(m, nil)
	recv(t, p)
	waitLive(t, m, 1)
	r0.exit <- &exitError{Err: errors.New("proxy epoch 0 exited: signal: segmentation fault")}
	eventually(t, "parent exited", func() error {
		if s := m.snapshot(); s.epochs[0].State != agentapi.EpochExited {
			return errors.New(s.epochs[0].State)
		}
		return nil
	})
	noStart(t, p, 3*minBackoff/2)
	s := m.snapshot()
	if s.restarts != 0 || s.failures != 0 || s.failed || s.lastExit != "" || !strings.Contains(s.epochs[0].Error, "segmentation fault") {
		t.Errorf("after the parent's crash: %+v", s)
	}
	if st, _, _ := m.serving(); st.Epoch != 1 {
		t.Errorf("serving epoch %d, want 1", st.Epoch)
	}
}

// Regression for istio#17853 (pilot-agent hot restarts end up in a bad state): a new
// epoch that fails during its hot restart must not take the live parent down with it;
// the pod stays served by the parent and the child is retried with backoff.
func TestEpochManagerIstio17853FailedChildKeepsParent(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	recv(t, p)
	waitLive(t, m, 0)
	p.setAutoLive(false) // the child fails while it initializes
	restartAsync(m, nil)
	r1 := recv(t, p)
	r1.exit <- &exitError{Err: errors.New("proxy epoch 1 exited: exit status 1"), Stderr: []string{"hot restart sendmsg() failed: errno 111"}}
	eventually(t, "child exit recorded", func() error {
		if s := m.snapshot(); s.failures != 1 {
			return fmt.Errorf("failures = %d", s.failures)
		}
		return nil
	})
	// The child may have taken the admin port before failing: the parent still serves
	// and the pod must not be reported down for the admin API's silence.
	if st, handedOver, ok := m.serving(); !ok || st.Epoch != 0 || st.State != agentapi.EpochLive || !handedOver {
		t.Errorf("serving %+v handedOver=%t, want the live parent 0, handed over", st, handedOver)
	}
	if slices.ContainsFunc(p.recorded(), func(e string) bool { return strings.HasPrefix(e, "abort 0") }) {
		t.Errorf("the parent was aborted: %q", p.recorded())
	}
	if s := m.snapshot(); !strings.Contains(s.lastExit, "errno 111") {
		t.Errorf("last exit %q, want the child's stderr", s.lastExit)
	}
	// Regression for istio#35740: the retry is the live parent's child again, epoch 1,
	// never epoch 2 (whose parent, epoch 1, does not exist).
	if r := recv(t, p); r.epoch != 1 {
		t.Errorf("retry started epoch %d, want 1", r.epoch)
	}
	if s := m.snapshot(); s.epochs[len(s.epochs)-1].Reason != agentapi.ReasonRetry || s.restarts != 1 {
		t.Errorf("retry: %+v", s)
	}
}

// Regression for istio#35740 through the API: a restart asked for after a failed child
// (before the backoff retry) also starts epoch parent+1.
func TestEpochManagerIstio35740RestartAfterFailedChild(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	recv(t, p)
	waitLive(t, m, 0)
	p.setAutoLive(false)
	restartAsync(m, nil)
	recv(t, p).exit <- &exitError{Err: errors.New("proxy epoch 1 exited: exit status 1")}
	eventually(t, "child failure counted", func() error {
		if m.snapshot().failures != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	res := restartAsync(m, nil)
	if r := recv(t, p); r.epoch != 1 {
		t.Errorf("restart started epoch %d, want 1", r.epoch)
	}
	if r := <-res; r.Epoch != 1 {
		t.Errorf("result %+v", r)
	}
	noStart(t, p, 2*minBackoff) // the pending backoff retry was cancelled
}

func TestEpochManagerNeverLiveEpochIsStopped(t *testing.T) {
	p := newFakeProxy()
	p.setAutoLive(false)
	m, _, _ := startManager(t, p, 0, func(m *epochManager) { m.liveTimeout = 30 * time.Millisecond })
	recv(t, p)
	eventually(t, "stopped and counted", func() error {
		if s := m.snapshot(); s.failures != 1 || !strings.Contains(s.lastExit, "did not become live") {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
	if !slices.Contains(p.recorded(), "abort 0: epoch did not become live in time") {
		t.Errorf("events %q", p.recorded())
	}
	if r := recv(t, p); r.epoch != 0 {
		t.Errorf("retry epoch %d", r.epoch)
	}
}

// Envoy keeps at most two epochs: starting a third stops the oldest.
func TestEpochManagerThirdEpochStopsTheOldest(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	recv(t, p)
	waitLive(t, m, 0)
	restartAsync(m, nil)
	recv(t, p)
	waitLive(t, m, 1)
	restartAsync(m, nil)
	if r := recv(t, p); r.epoch != 2 {
		t.Fatalf("epoch %d", r.epoch)
	}
	eventually(t, "epoch 0 stopped", func() error {
		if !slices.Contains(p.recorded(), "abort 0: "+errSuperseded.Error()) {
			return fmt.Errorf("%q", p.recorded())
		}
		return nil
	})
	if s := m.snapshot(); s.failures != 0 || s.lastExit != "" {
		t.Errorf("a superseded epoch is not a failure: %+v", s)
	}
}

func TestEpochManagerShutdownStopsEveryEpoch(t *testing.T) {
	p := newFakeProxy()
	m, cancel, done := startManager(t, p, 0)
	recv(t, p)
	waitLive(t, m, 0)
	restartAsync(m, nil)
	recv(t, p)
	waitLive(t, m, 1)
	cancel()
	select {
	case <-done:
		done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	ev := p.recorded()
	for _, want := range []string{"abort 0: epoch aborted", "abort 1: epoch aborted", "cleanup 0", "cleanup 1"} {
		if !slices.Contains(ev, want) {
			t.Errorf("events %q lack %q", ev, want)
		}
	}
	if _, err := m.Restart(context.Background(), nil); !errors.Is(err, agentapi.ErrStopping) {
		t.Errorf("restart after shutdown: %v, want agentapi.ErrStopping", err)
	}
}

func TestEpochManagerKeepsFewExitedEpochs(t *testing.T) {
	m := newEpochManager(newFakeProxy(), newFakeProxy(), baseSettings, 0, testutil.Logger(t))
	for i := range 8 {
		m.epochs = append(m.epochs, &agentapi.EpochStatus{Epoch: i, State: agentapi.EpochExited})
	}
	m.epochs = append(m.epochs, &agentapi.EpochStatus{Epoch: 8, State: agentapi.EpochLive})
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

// Regression for the dead-locks that shaped Istio's first agent (istio/old_pilot_repo#809,
// cascading aborts; #1329, lock-up on rapid config changes): restarts asked for in quick
// succession while epochs crash must keep making progress, one epoch at a time.
func TestEpochManagerRapidRestartsWithCrashesKeepProgress(t *testing.T) {
	p := newFakeProxy()
	m, _, _ := startManager(t, p, 0)
	recv(t, p)
	waitLive(t, m, 0)
	restartAsync(m, nil)
	r1 := recv(t, p)
	waitLive(t, m, 1)

	p.setAutoLive(false)
	res := restartAsync(m, nil)
	if r := recv(t, p); r.epoch != 2 {
		t.Fatalf("started epoch %d, want 2", r.epoch)
	}
	// The live parent crashes while its child initializes.
	r1.exit <- &exitError{Err: errors.New("proxy epoch 1 exited: signal: killed")}
	p.setState(2, adminv3.ServerInfo_LIVE)
	waitLive(t, m, 2)
	if r := <-res; r.Epoch != 2 {
		t.Errorf("restart result %+v, want epoch 2", r)
	}

	// Three restarts at once: each is answered with a new epoch after epoch 2 (requests
	// arriving while a child is still coming up share it), and the newest goes live.
	p.setAutoLive(true)
	var results []chan agentapi.RestartResult
	for range 3 {
		results = append(results, restartAsync(m, nil))
	}
	newest := 0
	for _, ch := range results {
		select {
		case r := <-ch:
			if r.Epoch < 3 || r.Epoch > 5 {
				t.Errorf("restart result %+v, want an epoch from 3 to 5", r)
			}
			newest = max(newest, r.Epoch)
		case <-time.After(10 * time.Second):
			t.Fatal("a restart request was never answered (the manager is stuck)")
		}
	}
	waitLive(t, m, newest)
}

// countingInfo counts the server_info requests of the manager.
type countingInfo struct {
	r serverInfoReader
	n atomic.Int64
}

func (c *countingInfo) serverInfo(ctx context.Context) (*adminv3.ServerInfo, error) {
	c.n.Add(1)
	return c.r.serverInfo(ctx)
}

// An idle pod's proxy is asked for its state less and less often (down to
// maxPollInterval), yet a change of the epochs brings the pace back at once: a hot
// restart's parent sees its child LIVE without waiting out the slow interval.
func TestEpochManagerIdlePollingBacksOff(t *testing.T) {
	p := newFakeProxy()
	ci := &countingInfo{r: p}
	m, _, _ := startManager(t, p, 0, func(m *epochManager) {
		m.info = ci
		m.startPollInterval, m.pollInterval, m.maxPollInterval = time.Millisecond, 10*time.Millisecond, time.Minute
	})
	recv(t, p)
	waitLive(t, m, 0)
	time.Sleep(time.Second)
	before := ci.n.Load()
	time.Sleep(time.Second)
	// At a fixed 10 ms this would be about 100 requests; backing off from 10 ms it is at
	// most one or two (the interval is past 1 s after seven doublings).
	if n := ci.n.Load() - before; n > 3 {
		t.Errorf("idle live epoch: %d server_info requests in 1s, want at most 3", n)
	}

	p.setAutoLive(false)
	res := restartAsync(m, nil)
	if r := recv(t, p); r.epoch != 1 {
		t.Fatalf("started epoch %d, want 1", r.epoch)
	}
	<-res
	start := time.Now()
	p.setState(1, adminv3.ServerInfo_LIVE)
	waitLive(t, m, 1)
	eventually(t, "parent draining", func() error {
		if s := m.snapshot(); s.epochs[0].State != agentapi.EpochDraining {
			return fmt.Errorf("parent is %s", s.epochs[0].State)
		}
		return nil
	})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("parent seen draining %s after its child went LIVE, want well under the 1 min idle interval", took)
	}
}

// whenLive runs its func once the first epoch is LIVE (the agent frees its start-up
// heap then), not before.
func TestWhenLive(t *testing.T) {
	p := newFakeProxy()
	p.setAutoLive(false)
	m, _, _ := startManager(t, p, 0)
	recv(t, p)
	called := make(chan struct{})
	go whenLive(t.Context(), m, func() { close(called) })
	select {
	case <-called:
		t.Fatal("called while the epoch is starting")
	case <-time.After(100 * time.Millisecond):
	}
	p.setState(0, adminv3.ServerInfo_LIVE)
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("not called 5s after the epoch went LIVE")
	}
}

// statingInfo is a proxy admin that also answers GET /ready (stateReader), counting
// which of the two the manager asks.
type statingInfo struct {
	p            *fakeProxy
	infos, reads atomic.Int64
}

func (s *statingInfo) serverInfo(ctx context.Context) (*adminv3.ServerInfo, error) {
	s.infos.Add(1)
	return s.p.serverInfo(ctx)
}

func (s *statingInfo) state(ctx context.Context) (adminv3.ServerInfo_State, error) {
	s.reads.Add(1)
	si, err := s.p.serverInfo(ctx)
	return si.GetState(), err
}

// While one epoch runs the manager reads the cheap /ready; while a hot restart has two,
// /server_info, whose restart_epoch tells the parent's answer from the child's.
func TestEpochManagerReadsReadyWhileAlone(t *testing.T) {
	p := newFakeProxy()
	si := &statingInfo{p: p}
	m, _, _ := startManager(t, p, 0, func(m *epochManager) { m.info = si })
	recv(t, p)
	waitLive(t, m, 0)
	if si.reads.Load() == 0 || si.infos.Load() != 0 {
		t.Errorf("one epoch: %d /ready and %d /server_info reads, want only /ready", si.reads.Load(), si.infos.Load())
	}
	p.setAutoLive(false)
	res := restartAsync(m, nil)
	recv(t, p)
	<-res
	p.setState(1, adminv3.ServerInfo_LIVE)
	waitLive(t, m, 1)
	eventually(t, "parent draining", func() error {
		if s := m.snapshot(); s.epochs[0].State != agentapi.EpochDraining {
			return fmt.Errorf("parent is %s", s.epochs[0].State)
		}
		return nil
	})
	if si.infos.Load() == 0 {
		t.Error("two epochs: no /server_info read")
	}
}

// An epoch that takes long to start is asked less often after startFastFor, and is
// still seen LIVE soon after it gets there.
func TestEpochManagerSlowStarterIsAskedLessOften(t *testing.T) {
	p := newFakeProxy()
	p.setAutoLive(false)
	ci := &countingInfo{r: p}
	m, _, _ := startManager(t, p, 0, func(m *epochManager) {
		m.info = ci
		m.startPollInterval, m.startFastFor, m.slowStartPollInterval = time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	})
	recv(t, p)
	time.Sleep(300 * time.Millisecond)
	before := ci.n.Load()
	time.Sleep(time.Second)
	// At 1 ms this would be hundreds of reads; at 100 ms about 10.
	if n := ci.n.Load() - before; n < 3 || n > 15 {
		t.Errorf("starting epoch: %d state reads in 1s after its fast start, want about 10", n)
	}
	start := time.Now()
	p.setState(0, adminv3.ServerInfo_LIVE)
	waitLive(t, m, 0)
	if took := time.Since(start); took > time.Second {
		t.Errorf("LIVE seen after %s, want within a slow poll interval", took)
	}
}
