package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
)

// Restart backoff after the newest proxy epoch exits unexpectedly.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// backoffReset is how long a proxy must have run for its crash to restart it at
// minBackoff again; a proxy that gets live and crashes at once keeps backing off.
const backoffReset = 10 * time.Second

// DefaultRestartBudget is how many unexpected exits in a row the agent restarts before
// it marks the pod failed.
const DefaultRestartBudget = 10

// DefaultLiveTimeout is how long a new epoch has to report LIVE before it is stopped and
// counted as a failure.
const DefaultLiveTimeout = 60 * time.Second

// keptEpochs bounds Status.Epochs: the running epochs plus the most recent exited ones.
const keptEpochs = 5

// Reasons an epoch is stopped on purpose, sent on its abort channel.
var (
	errAbort      = errors.New("epoch aborted")
	errSuperseded = errors.New("epoch superseded: a third epoch started (envoy keeps at most two)")
	errNotLive    = errors.New("epoch did not become live in time")
)

// serverInfoReader reads the proxy's /server_info; adminClient is the real one. It must be
// safe for concurrent use.
type serverInfoReader interface {
	serverInfo(ctx context.Context) (*adminv3.ServerInfo, error)
}

// stateReader reads the proxy's server state alone (GET /ready), which does not say which
// epoch answers; adminClient is one. A serverInfoReader that is one too is asked this way
// while only one epoch runs, when the answer can only be that epoch's.
type stateReader interface {
	state(ctx context.Context) (adminv3.ServerInfo_State, error)
}

var _ stateReader = adminClient{}

// exitStatus is one epoch's end, reported on the manager's status channel.
type exitStatus struct {
	epoch int
	err   error
}

// restartReq asks the control loop for a new epoch. settings nil means "same settings,
// new epoch anyway" (POST /restart); otherwise the new settings, a no-op when they equal
// the current ones (PUT /proxy-config).
type restartReq struct {
	settings *agentapi.ProxySettings
	reply    chan agentapi.RestartResult // buffered 1; nil for the loop's own retries
}

// epochManager owns the proxy processes. Its shape is Istio's pre-2021 pkg/envoy/agent.go:
// one control loop (Run) is the only reader of statusCh and the only writer of the epoch
// plan, every running epoch has an abort channel in activeEpochs, each epoch's goroutine
// reports its exit on statusCh, and a restart starts epoch N+1 only once epoch N is LIVE.
//
// It keeps the lessons of the bugs that made Istio remove hot restart:
//   - a failing new epoch never takes its live parent down: the pod stays served by the
//     parent and the attempt is retried with backoff (istio#17853);
//   - the epoch number of a retry is always the live parent's plus one, never a number
//     whose parent is gone, and a crash with no epoch left starts again at 0 (istio#35740);
//   - Run returns only after every epoch has exited, so no proxy outlives the agent;
//   - abort channels are buffered so aborting an epoch that is exiting never blocks;
//   - a failure is never matched by its message.
type epochManager struct {
	proxy             proxy
	info              serverInfoReader
	log               *slog.Logger
	terminationDrain  time.Duration
	startPollInterval time.Duration // server_info polling until the epoch is live
	pollInterval      time.Duration // and after, doubling while nothing changes
	maxPollInterval   time.Duration // up to this: an idle pod's proxy is asked rarely
	// An epoch still starting after startFastFor is asked every slowStartPollInterval:
	// on a quiet machine a proxy is LIVE well within it; on a loaded one (a 100-pod up)
	// fast polls of slow starters were a fifth of the agents' CPU.
	startFastFor          time.Duration
	slowStartPollInterval time.Duration
	budget                int           // unexpected exits in a row before the pod is failed
	liveTimeout           time.Duration // a new epoch must be LIVE within this

	statusCh  chan exitStatus
	restartCh chan restartReq
	stopped   chan struct{} // closed when Run returns

	mu           sync.Mutex
	activeEpochs map[int]chan error      // epoch -> abort channel (buffered 1)
	aborted      map[int]error           // epochs stopped on purpose, and why
	epochs       []*agentapi.EpochStatus // running and recently exited, oldest first
	settings     agentapi.ProxySettings  // what new epochs start with
	restarts     int
	failures     int // unexpected exits of the newest epoch in a row
	failed       bool
	nextRestart  *time.Time
	lastExit     string // error and last stderr lines of the last unexpected exit
	// changed is closed and replaced (notifyLocked) whenever an epoch starts, changes
	// state or exits, or the pod is marked failed or cleared: readiness waiters and the
	// state pollers wake on it instead of polling.
	changed chan struct{}
}

func newEpochManager(p proxy, info serverInfoReader, s agentapi.ProxySettings, terminationDrain time.Duration, log *slog.Logger) *epochManager {
	return &epochManager{
		proxy:             p,
		info:              info,
		log:               log,
		terminationDrain:  terminationDrain,
		startPollInterval: 50 * time.Millisecond,
		pollInterval:      500 * time.Millisecond,
		// Istio's readiness probe asks a sidecar every 15 s (readinessPeriodSeconds);
		// every poll wakes the agent and its proxy, and an idle pod has nothing else to
		// wake them. A change the agent makes (a restart) brings the pace back at once.
		maxPollInterval: 15 * time.Second,

		startFastFor:          time.Second,
		slowStartPollInterval: 200 * time.Millisecond,
		budget:                DefaultRestartBudget,
		liveTimeout:           DefaultLiveTimeout,
		statusCh:              make(chan exitStatus),
		restartCh:             make(chan restartReq),
		stopped:               make(chan struct{}),
		activeEpochs:          make(map[int]chan error),
		aborted:               make(map[int]error),
		settings:              settingsWithDefaults(s),
		changed:               make(chan struct{}),
	}
}

// changes returns a channel closed at the next change of the epochs' states or of the
// failed mark. Safe for concurrent use.
func (m *epochManager) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// notifyLocked wakes everyone waiting on changes. m.mu must be held.
func (m *epochManager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Restart asks for a new epoch. With s nil it always starts one (same settings); with s
// set it starts one only when s differs from the current settings. It returns once the
// new epoch is started (which waits until the current one is LIVE), not once the new one
// is LIVE.
func (m *epochManager) Restart(ctx context.Context, s *agentapi.ProxySettings) (agentapi.RestartResult, error) {
	if s != nil {
		if err := validateSettings(*s); err != nil {
			return agentapi.RestartResult{Epoch: -1}, err
		}
		d := settingsWithDefaults(*s)
		s = &d
	}
	req := restartReq{settings: s, reply: make(chan agentapi.RestartResult, 1)}
	select {
	case m.restartCh <- req:
	case <-m.stopped:
		return agentapi.RestartResult{Epoch: -1}, agentapi.ErrStopping
	case <-ctx.Done():
		return agentapi.RestartResult{Epoch: -1}, fmt.Errorf("request proxy restart: %w", ctx.Err())
	}
	select {
	case r, ok := <-req.reply:
		if !ok {
			return agentapi.RestartResult{Epoch: -1}, agentapi.ErrStopping
		}
		return r, nil
	case <-ctx.Done():
		return agentapi.RestartResult{Epoch: -1}, fmt.Errorf("wait for proxy restart: %w", ctx.Err())
	}
}

// loopState is what only the control loop touches.
type loopState struct {
	pending []restartReq // waiting for the newest epoch to be live
	reason  string       // why the pending epoch starts
	backoff time.Duration
	retry   *time.Timer
	retryC  <-chan time.Time
}

// Run starts epoch 0 and supervises the epochs until ctx ends; then it drains and stops
// every epoch and returns once all have exited.
func (m *epochManager) Run(ctx context.Context) error {
	defer close(m.stopped)
	m.startEpoch(0, agentapi.ReasonInitial)
	ls := &loopState{backoff: minBackoff}
	tick := time.NewTicker(m.startPollInterval)
	defer tick.Stop()
	defer func() {
		if ls.retry != nil {
			ls.retry.Stop()
		}
	}()
	for {
		// The ticker is read only while something waits on an epoch's state (a pending
		// restart, a live timeout): an idle pod's agent does not wake up for it.
		var tickC <-chan time.Time
		if m.waiting(ls) {
			tickC = tick.C
		}
		select {
		case req := <-m.restartCh:
			m.onRestart(ls, req)
		case <-tickC:
			m.checkLiveTimeout()
			m.tryStart(ls)
		case st := <-m.statusCh:
			m.onExit(ls, st)
			m.tryStart(ls) // a pending epoch may have waited for this one to be gone
		case <-ls.retryC:
			ls.retryC = nil
			m.mu.Lock()
			m.restarts++
			m.nextRestart = nil
			m.mu.Unlock()
			ls.pending = append(ls.pending, restartReq{})
			m.tryStart(ls)
		case <-ctx.Done():
			for _, r := range ls.pending {
				if r.reply != nil {
					close(r.reply)
				}
			}
			m.terminate()
			return nil
		}
	}
}

// waiting reports whether the control loop has to look at the epochs on its own: a
// restart is pending (it starts once the newest epoch is LIVE and the one before its
// parent is gone) or the newest epoch is still starting (its live timeout).
func (m *epochManager) waiting(ls *loopState) bool {
	if len(ls.pending) > 0 {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.newestRunningLocked()
	return ok && st.State == agentapi.EpochStarting
}

// onRestart handles a Restart request.
func (m *epochManager) onRestart(ls *loopState, req restartReq) {
	m.mu.Lock()
	reason := agentapi.ReasonRestart
	if req.settings != nil {
		if reflect.DeepEqual(*req.settings, m.settings) {
			m.mu.Unlock()
			req.reply <- agentapi.RestartResult{Epoch: -1}
			return
		}
		m.log.Info("proxy settings changed", "from", m.settings, "to", *req.settings)
		m.settings = *req.settings
		reason = agentapi.ReasonConfig
	}
	// A restart asked for by a person clears a failed pod and its backoff.
	if m.failed {
		m.notifyLocked()
	}
	m.failed = false
	m.failures = 0
	m.nextRestart = nil
	m.mu.Unlock()
	if ls.retry != nil {
		ls.retry.Stop()
		ls.retryC = nil
	}
	ls.backoff = minBackoff
	ls.pending = append(ls.pending, req)
	ls.reason = reason
	m.tryStart(ls)
}

// tryStart starts the pending epoch when it may: at once when no epoch runs (epoch 0),
// else once the newest running epoch is LIVE (epoch newest+1), as Envoy's hot restart
// needs a parent that has finished initializing.
func (m *epochManager) tryStart(ls *loopState) {
	if len(ls.pending) == 0 {
		return
	}
	m.mu.Lock()
	newest, ok := m.newestRunningLocked()
	oldest, hasOld := m.oldestRunningLocked()
	m.mu.Unlock()
	next := 0
	if ok {
		if newest.State != agentapi.EpochLive {
			return // Istio: "waiting for epoch N to go live before performing a hot restart"
		}
		next = newest.Epoch + 1
		// Envoy's hot restart names its domain sockets by epoch % 3, so at most three
		// epochs may run: epoch N+1 would fail to bind while N-2 is still exiting (a busy
		// machine, a parent draining long connections). Start it once N-2 is gone; the
		// ticker tries again.
		if hasOld && oldest.Epoch <= next-3 {
			return
		}
	}
	reason := ls.reason
	if reason == "" {
		reason = agentapi.ReasonRetry
		if !ok {
			reason = agentapi.ReasonCrash
		}
	}
	m.startEpoch(next, reason)
	for _, r := range ls.pending {
		if r.reply != nil {
			r.reply <- agentapi.RestartResult{Epoch: next, Restarted: true}
		}
	}
	ls.pending, ls.reason = nil, ""
}

// onExit handles one epoch's exit.
func (m *epochManager) onExit(ls *loopState, x exitStatus) {
	r := m.recordExit(x)
	switch {
	case r.onPurpose != nil && !errors.Is(r.onPurpose, errNotLive):
		return
	case !r.wasNewest:
		// A parent leaving after its child took over: the normal end of a hot restart,
		// or a crash while draining; either way the newer epoch serves.
		if x.err != nil {
			m.log.Warn("draining proxy epoch exited with an error", "epoch", x.epoch, "err", x.err)
		}
		return
	}
	var se *startError
	if errors.As(x.err, &se) {
		m.fail(ls, fmt.Sprintf("proxy cannot be started: %v", x.err))
		return
	}
	if r.ran >= backoffReset {
		ls.backoff = minBackoff
		m.mu.Lock()
		m.failures = 0
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.failures++
	failures := m.failures
	m.mu.Unlock()
	if failures > m.budget {
		m.fail(ls, fmt.Sprintf("proxy exited unexpectedly %d times in a row; not restarting it again (meshlab proxy restart tries again)", failures))
		return
	}
	m.log.Warn("proxy exited unexpectedly, restarting", "epoch", x.epoch, "err", x.err, "backoff", ls.backoff, "failures", failures, "budget", m.budget)
	at := time.Now().Add(ls.backoff)
	m.mu.Lock()
	m.nextRestart = &at
	m.mu.Unlock()
	if ls.retry != nil {
		ls.retry.Stop()
	}
	ls.retry = time.NewTimer(ls.backoff)
	ls.retryC = ls.retry.C
	ls.backoff = min(2*ls.backoff, maxBackoff)
}

// fail marks the pod failed: no more automatic restarts, pending requests are answered
// with nothing started.
func (m *epochManager) fail(ls *loopState, why string) {
	m.log.Error("proxy failed", "why", why)
	m.mu.Lock()
	m.failed = true
	m.nextRestart = nil
	m.notifyLocked()
	if m.lastExit != "" {
		m.lastExit = why + "\n" + m.lastExit
	} else {
		m.lastExit = why
	}
	m.mu.Unlock()
	for _, r := range ls.pending {
		if r.reply != nil {
			r.reply <- agentapi.RestartResult{Epoch: -1}
		}
	}
	ls.pending, ls.reason = nil, ""
}

// checkLiveTimeout stops the newest epoch if it has not become LIVE in time; its exit
// then counts as a failure.
func (m *epochManager) checkLiveTimeout() {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.newestRunningLocked()
	if !ok || st.State != agentapi.EpochStarting || time.Since(st.StartedAt) < m.liveTimeout {
		return
	}
	abort, ok := m.activeEpochs[st.Epoch]
	if !ok || m.aborted[st.Epoch] != nil {
		return
	}
	m.log.Warn("proxy epoch did not become live, stopping it", "epoch", st.Epoch, "timeout", m.liveTimeout)
	m.aborted[st.Epoch] = errNotLive
	abort <- errNotLive
}

// startEpoch runs epoch in its own goroutine, which reports its exit on statusCh. Envoy
// keeps at most two epochs, so any epoch older than epoch-1 is stopped first.
func (m *epochManager) startEpoch(epoch int, reason string) {
	abort := make(chan error, 1)
	st := &agentapi.EpochStatus{Epoch: epoch, State: agentapi.EpochStarting, StartedAt: time.Now(), Reason: reason}
	m.mu.Lock()
	for e, ch := range m.activeEpochs {
		if e < epoch-1 && m.aborted[e] == nil {
			m.aborted[e] = errSuperseded
			ch <- errSuperseded
		}
	}
	m.activeEpochs[epoch] = abort
	delete(m.aborted, epoch)
	m.epochs = append(m.epochs, st)
	m.trimLocked()
	m.notifyLocked()
	s := m.settings
	m.mu.Unlock()
	m.log.Info("starting proxy epoch", "epoch", epoch, "reason", reason)
	go m.runWait(epoch, s, st, abort)
}

func (m *epochManager) runWait(epoch int, s agentapi.ProxySettings, st *agentapi.EpochStatus, abort chan error) {
	pollCtx, stopPoll := context.WithCancel(context.Background())
	var polls sync.WaitGroup
	err := m.proxy.Run(epoch, s, abort, func(pi processInfo) {
		m.mu.Lock()
		st.PID, st.ProxyPath, st.ProxyVersion, st.DataPlane = pi.PID, pi.Path, pi.Version, pi.DataPlane
		m.mu.Unlock()
		polls.Go(func() { m.pollState(pollCtx, st) })
	})
	stopPoll()
	polls.Wait()
	m.proxy.Cleanup(epoch)
	m.statusCh <- exitStatus{epoch: epoch, err: err}
}

// pollState follows one epoch's server_info state until ctx ends: often while it
// starts (every startPollInterval for startFastFor, then every slowStartPollInterval),
// so readiness follows quickly, then at pollInterval, doubling up to
// maxPollInterval while nothing changes, so that an idle pod's agent and proxy sleep.
// Any change of the epochs (a new epoch, a state, an exit; notifyLocked) brings it back
// to the start pace: a hot restart's parent sees its child's LIVE at once.
//
// The admin port belongs to one process at a time (a hot-restarting child asks its
// parent to close it), so an answer is attributed by its restart_epoch: the epoch's own
// answer sets its state; a newer epoch's LIVE answer means this one is draining.
func (m *epochManager) pollState(ctx context.Context, st *agentapi.EpochStatus) {
	interval := m.startPollInterval
	for {
		changed := m.changes()
		if si, err := m.readState(ctx, st.Epoch); err == nil {
			reported := int(si.GetCommandLineOptions().GetRestartEpoch())
			m.mu.Lock()
			was := st.State
			switch {
			case st.State == agentapi.EpochExited:
			case reported == st.Epoch:
				st.State = epochState(si.GetState())
			case reported > st.Epoch && si.GetState() == adminv3.ServerInfo_LIVE:
				st.State = agentapi.EpochDraining
			}
			switch {
			case st.State != was:
				m.notifyLocked()
				interval = m.pollInterval
			case st.State == agentapi.EpochLive || st.State == agentapi.EpochDraining:
				interval = min(max(2*interval, m.pollInterval), max(m.maxPollInterval, m.pollInterval))
			}
			m.mu.Unlock()
		}
		m.mu.Lock()
		if st.State == agentapi.EpochStarting {
			interval = m.startPollInterval
			if time.Since(st.StartedAt) > m.startFastFor {
				interval = max(m.slowStartPollInterval, m.startPollInterval)
			}
		}
		m.mu.Unlock()
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-changed:
			t.Stop()
			interval = m.startPollInterval
		}
	}
}

// readState asks the proxy for its state on behalf of epoch: by GET /ready when that
// epoch is the only one running and the reader can (stateReader), else by /server_info,
// whose restart_epoch says who answered.
func (m *epochManager) readState(ctx context.Context, epoch int) (*adminv3.ServerInfo, error) {
	sr, ok := m.info.(stateReader)
	if ok {
		m.mu.Lock()
		for _, e := range m.epochs {
			if e.State != agentapi.EpochExited && e.Epoch != epoch {
				ok = false
			}
		}
		m.mu.Unlock()
	}
	if !ok {
		return m.info.serverInfo(ctx)
	}
	state, err := sr.state(ctx)
	if err != nil {
		return nil, err
	}
	return &adminv3.ServerInfo{State: state, CommandLineOptions: &adminv3.CommandLineOptions{RestartEpoch: uint32(epoch)}}, nil
}

// epochState maps Envoy's server state to an EpochStatus state.
func epochState(s adminv3.ServerInfo_State) string {
	switch s {
	case adminv3.ServerInfo_LIVE:
		return agentapi.EpochLive
	case adminv3.ServerInfo_DRAINING:
		return agentapi.EpochDraining
	default:
		return agentapi.EpochStarting
	}
}

// exitRecord is what recordExit learned.
type exitRecord struct {
	ran       time.Duration
	onPurpose error // why the epoch was stopped on purpose; nil if it was not
	wasNewest bool  // no newer epoch was running when it exited
}

// recordExit marks an epoch exited.
func (m *epochManager) recordExit(x exitStatus) exitRecord {
	now := time.Now()
	code := exitCode(x.err)
	m.mu.Lock()
	defer m.mu.Unlock()
	var r exitRecord
	delete(m.activeEpochs, x.epoch)
	r.onPurpose = m.aborted[x.epoch]
	delete(m.aborted, x.epoch)
	r.wasNewest = true
	for e := range m.activeEpochs {
		if e > x.epoch {
			r.wasNewest = false
		}
	}
	for _, st := range m.epochs {
		if st.Epoch != x.epoch || st.State == agentapi.EpochExited {
			continue
		}
		r.ran = now.Sub(st.StartedAt)
		st.State = agentapi.EpochExited
		m.notifyLocked()
		st.ExitedAt = &now
		st.ExitCode = &code
		switch {
		case x.err != nil:
			st.Error = x.err.Error()
		case r.onPurpose != nil && !errors.Is(r.onPurpose, errAbort):
			st.Error = r.onPurpose.Error()
		}
		break
	}
	if r.wasNewest && (r.onPurpose == nil || errors.Is(r.onPurpose, errNotLive)) {
		m.lastExit = describeExit(x, r.onPurpose)
	}
	m.trimLocked()
	return r
}

// describeExit is the Status message for an unexpected exit: the error, then the last
// stderr lines.
func describeExit(x exitStatus, why error) string {
	msg := fmt.Sprintf("proxy epoch %d exited with status 0", x.epoch)
	if why != nil {
		msg = fmt.Sprintf("proxy epoch %d: %v", x.epoch, why)
	}
	if x.err == nil {
		return msg
	}
	if why == nil {
		msg = x.err.Error()
	}
	var ee *exitError
	if errors.As(x.err, &ee) && len(ee.Stderr) > 0 {
		msg += "\n" + strings.Join(ee.Stderr, "\n")
	}
	return msg
}

// trimLocked drops the oldest exited epochs beyond keptEpochs. m.mu must be held.
func (m *epochManager) trimLocked() {
	for len(m.epochs) > keptEpochs {
		i := -1
		for j, st := range m.epochs {
			if st.State == agentapi.EpochExited {
				i = j
				break
			}
		}
		if i < 0 {
			return
		}
		m.epochs = append(m.epochs[:i], m.epochs[i+1:]...)
	}
}

// terminate drains the proxy, waits terminationDrain, stops every epoch and waits until
// all have exited. Only Run calls it.
func (m *epochManager) terminate() {
	if m.active() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		if err := m.proxy.Drain(ctx); err != nil {
			m.log.Warn("drain proxy listeners", "err", err)
		}
		cancel()
		m.log.Info("draining proxy before stopping it", "wait", m.terminationDrain)
		t := time.NewTimer(m.terminationDrain)
	wait:
		for m.active() > 0 {
			select {
			case st := <-m.statusCh:
				m.recordExit(st)
			case <-t.C:
				break wait
			}
		}
		t.Stop()
	}
	m.mu.Lock()
	for epoch, abort := range m.activeEpochs {
		if m.aborted[epoch] == nil {
			m.aborted[epoch] = errAbort
			abort <- errAbort
		}
	}
	m.mu.Unlock()
	for m.active() > 0 {
		m.recordExit(<-m.statusCh)
	}
}

func (m *epochManager) active() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.activeEpochs)
}

// newestRunningLocked returns the newest epoch that has not exited. m.mu must be held.
func (m *epochManager) newestRunningLocked() (agentapi.EpochStatus, bool) {
	var best *agentapi.EpochStatus
	for _, st := range m.epochs {
		if st.State != agentapi.EpochExited && (best == nil || st.Epoch >= best.Epoch) {
			best = st
		}
	}
	if best == nil {
		return agentapi.EpochStatus{}, false
	}
	return *best, true
}

// oldestRunningLocked returns the oldest epoch that has not exited. m.mu must be held.
func (m *epochManager) oldestRunningLocked() (agentapi.EpochStatus, bool) {
	var best *agentapi.EpochStatus
	for _, st := range m.epochs {
		if st.State != agentapi.EpochExited && (best == nil || st.Epoch < best.Epoch) {
			best = st
		}
	}
	if best == nil {
		return agentapi.EpochStatus{}, false
	}
	return *best, true
}

// serving returns the epoch that serves the pod: the newest LIVE one, else the newest
// running one. handedOver reports whether an epoch was started after it (running or
// not): that epoch may have taken the admin port over, even if it failed later, so
// the admin API no longer speaks for the serving epoch.
func (m *epochManager) serving() (st agentapi.EpochStatus, handedOver, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	newest, ok := m.newestRunningLocked()
	if !ok {
		return agentapi.EpochStatus{}, false, false
	}
	st = newest
	for i := len(m.epochs) - 1; i >= 0; i-- {
		if e := m.epochs[i]; e.State == agentapi.EpochLive {
			st = *e
			break
		}
	}
	for _, e := range m.epochs {
		if e.StartedAt.After(st.StartedAt) {
			handedOver = true
		}
	}
	return st, handedOver, true
}

// epochSnapshot is a copy of the manager's state for Status.
type epochSnapshot struct {
	epochs      []agentapi.EpochStatus
	restarts    int
	failures    int
	failed      bool
	nextRestart *time.Time
	lastExit    string
	settings    agentapi.ProxySettings
}

// snapshot returns a copy of the manager's state.
func (m *epochManager) snapshot() epochSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]agentapi.EpochStatus, len(m.epochs))
	for i, st := range m.epochs {
		out[i] = *st
	}
	return epochSnapshot{
		epochs: out, restarts: m.restarts, failures: m.failures, failed: m.failed,
		nextRestart: m.nextRestart, lastExit: m.lastExit, settings: m.settings,
	}
}
