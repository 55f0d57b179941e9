package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
)

// Restart backoff after a proxy exits unexpectedly.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// backoffReset is how long a proxy must have run for its crash to restart it at
// minBackoff again; a proxy that gets live and crashes at once keeps backing off.
const backoffReset = 10 * time.Second

// keptEpochs bounds Status.Epochs: the running epochs plus the most recent exited ones.
const keptEpochs = 5

// errAbort is sent on an epoch's abort channel to stop it.
var errAbort = errors.New("epoch aborted")

// serverInfoReader reads the proxy's /server_info; adminClient is the real one. It must be
// safe for concurrent use.
type serverInfoReader interface {
	serverInfo(ctx context.Context) (*adminv3.ServerInfo, error)
}

// exitStatus is one epoch's end, reported on the manager's status channel.
type exitStatus struct {
	epoch int
	err   error
}

// epochManager owns the proxy processes. Its shape is Istio's pre-2021 pkg/envoy/agent.go:
// one control loop (Run) is the only reader of statusCh, every running epoch has an abort
// channel in activeEpochs, and each epoch's goroutine reports its exit on statusCh.
// Lessons from the bugs that made Istio remove it are kept: Run returns only after every
// epoch has exited (no proxy outlives the agent), an unexpected exit of the last epoch
// restarts it with backoff instead of ending the agent, abort channels are buffered so
// aborting an epoch that is exiting never blocks the loop, and a failure is never
// matched by its message.
//
// This slice only ever runs epoch 0; a later Restart will start currentEpoch+1 with
// --restart-epoch once the current epoch is live.
type epochManager struct {
	proxy             proxy
	info              serverInfoReader
	log               *slog.Logger
	terminationDrain  time.Duration
	startPollInterval time.Duration // server_info polling until the epoch is live
	pollInterval      time.Duration // and after

	statusCh chan exitStatus

	mu           sync.Mutex
	activeEpochs map[int]chan error // epoch -> abort channel (buffered 1)
	aborted      map[int]bool       // epochs stopped on purpose
	currentEpoch int
	epochs       []*EpochStatus // running and recently exited, oldest first
	restarts     int
	lastExit     string // error and last stderr lines of the last unexpected exit
}

func newEpochManager(p proxy, info serverInfoReader, terminationDrain time.Duration, log *slog.Logger) *epochManager {
	return &epochManager{
		proxy:             p,
		info:              info,
		log:               log,
		terminationDrain:  terminationDrain,
		startPollInterval: 50 * time.Millisecond,
		pollInterval:      500 * time.Millisecond,
		statusCh:          make(chan exitStatus),
		activeEpochs:      make(map[int]chan error),
		aborted:           make(map[int]bool),
	}
}

// Run starts epoch 0 and supervises it until ctx ends; then it drains and stops every
// epoch and returns once all have exited.
func (m *epochManager) Run(ctx context.Context) error {
	m.startEpoch(0)
	backoff := minBackoff
	var retry *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case st := <-m.statusCh:
			ran, onPurpose, active := m.recordExit(st)
			if onPurpose || active > 0 {
				continue
			}
			if ran >= backoffReset {
				backoff = minBackoff
			}
			m.log.Warn("proxy exited unexpectedly, restarting", "epoch", st.epoch, "err", st.err, "backoff", backoff)
			retry = time.NewTimer(backoff)
			retryC = retry.C
			backoff = min(2*backoff, maxBackoff)
		case <-retryC:
			retryC = nil
			m.mu.Lock()
			m.restarts++
			m.mu.Unlock()
			m.startEpoch(0)
		case <-ctx.Done():
			m.terminate()
			return nil
		}
	}
}

// startEpoch runs epoch in its own goroutine, which reports its exit on statusCh.
func (m *epochManager) startEpoch(epoch int) {
	abort := make(chan error, 1)
	st := &EpochStatus{Epoch: epoch, State: EpochStarting, StartedAt: time.Now()}
	m.mu.Lock()
	m.currentEpoch = epoch
	m.activeEpochs[epoch] = abort
	delete(m.aborted, epoch)
	m.epochs = append(m.epochs, st)
	m.trimLocked()
	m.mu.Unlock()
	go m.runWait(epoch, st, abort)
}

func (m *epochManager) runWait(epoch int, st *EpochStatus, abort chan error) {
	pollCtx, stopPoll := context.WithCancel(context.Background())
	var polls sync.WaitGroup
	err := m.proxy.Run(epoch, abort, func(pid int) {
		m.mu.Lock()
		st.PID = pid
		m.mu.Unlock()
		polls.Go(func() { m.pollState(pollCtx, st) })
	})
	stopPoll()
	polls.Wait()
	m.proxy.Cleanup(epoch)
	m.statusCh <- exitStatus{epoch: epoch, err: err}
}

// pollState follows one epoch's server_info state until ctx ends: often while it
// starts, so readiness follows quickly, then at a slower pace.
func (m *epochManager) pollState(ctx context.Context, st *EpochStatus) {
	for {
		interval := m.startPollInterval
		if si, err := m.info.serverInfo(ctx); err == nil {
			m.mu.Lock()
			if st.State != EpochExited {
				st.State = epochState(si.GetState())
			}
			if st.State == EpochLive {
				interval = m.pollInterval
			}
			m.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// epochState maps Envoy's server state to an EpochStatus state.
func epochState(s adminv3.ServerInfo_State) string {
	switch s {
	case adminv3.ServerInfo_LIVE:
		return EpochLive
	case adminv3.ServerInfo_DRAINING:
		return EpochDraining
	default:
		return EpochStarting
	}
}

// recordExit marks an epoch exited and returns how long it ran, whether it was stopped on
// purpose, and how many epochs are still running.
func (m *epochManager) recordExit(x exitStatus) (ran time.Duration, onPurpose bool, active int) {
	now := time.Now()
	code := exitCode(x.err)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.activeEpochs, x.epoch)
	onPurpose = m.aborted[x.epoch]
	delete(m.aborted, x.epoch)
	for _, st := range m.epochs {
		if st.Epoch != x.epoch || st.State == EpochExited {
			continue
		}
		ran = now.Sub(st.StartedAt)
		st.State = EpochExited
		st.ExitedAt = &now
		st.ExitCode = &code
		if x.err != nil {
			st.Error = x.err.Error()
		}
		break
	}
	if !onPurpose {
		m.lastExit = describeExit(x)
	}
	m.trimLocked()
	return ran, onPurpose, len(m.activeEpochs)
}

// describeExit is the Status message for an unexpected exit: the error, then the last
// stderr lines.
func describeExit(x exitStatus) string {
	if x.err == nil {
		return "proxy exited with status 0"
	}
	msg := x.err.Error()
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
			if st.State == EpochExited {
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
		m.aborted[epoch] = true
		abort <- errAbort
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

// newest returns the newest running epoch and reports whether there is one.
func (m *epochManager) newest() (EpochStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.epochs) - 1; i >= 0; i-- {
		if st := m.epochs[i]; st.State != EpochExited {
			return *st, true
		}
	}
	return EpochStatus{}, false
}

// snapshot returns copies of the epochs, the restart count and the last exit message.
func (m *epochManager) snapshot() ([]EpochStatus, int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]EpochStatus, len(m.epochs))
	for i, st := range m.epochs {
		out[i] = *st
	}
	return out, m.restarts, m.lastExit
}
