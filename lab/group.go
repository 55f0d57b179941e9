package lab

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/netns"
)

// processSpec says how to start one supervised process inside a pod namespace.
type processSpec struct {
	Role    string // "agent" or "app"
	Pod     string
	NetNS   string
	Argv    []string
	UID     uint32         // 0 = root
	Sandbox *netns.Sandbox // set: run as a sandboxed app (netns.StartSandboxed), UID unused
	LogPath string
	// Env is optional: added to the clean environment the process starts with.
	Env []string
	// Grace is how long the process gets between SIGTERM and SIGKILL.
	Grace time.Duration
}

// group supervises processes the way a kubelet does its containers: a process that exits
// is started again with exponential backoff (capped at 10s) until the group stops.
type group struct {
	log    *slog.Logger
	jr     *journal
	procs  processes // where its processes start
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	byPod  map[string][]supervised // what runs for each pod, for stopPod
	// restarts counts each pod's processes started again after an exit.
	restarts map[string]int
	// publish, when set, puts the group's process events on the lab's bus.
	publish func(kind, pod, msg string, fields map[string]any)
}

func newGroup(log *slog.Logger, jr *journal, procs processes) *group {
	ctx, cancel := context.WithCancel(context.Background())
	return &group{log: log, jr: jr, procs: procs, ctx: ctx, cancel: cancel}
}

// supervised is one process the group supervises: cancel stops it, done is closed once
// it has exited and will not be started again.
type supervised struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// start launches spec and returns once the first instance has started (or failed to).
func (g *group) start(spec processSpec) error {
	g.mu.Lock()
	if g.ctx.Err() != nil {
		g.mu.Unlock()
		return fmt.Errorf("start %s of %s: the lab is stopping", spec.Role, spec.Pod)
	}
	g.wg.Add(1) // before stop's Wait can begin; launching outside the lock keeps pods starting in parallel
	ctx, cancel := context.WithCancel(g.ctx)
	s := supervised{cancel: cancel, done: make(chan struct{})}
	if g.byPod == nil {
		g.byPod = map[string][]supervised{}
	}
	g.byPod[spec.Pod] = append(g.byPod[spec.Pod], s)
	g.mu.Unlock()
	cmd, err := g.launch(spec)
	if err != nil {
		cancel()
		close(s.done)
		g.wg.Done()
		return err
	}
	go func() {
		defer g.wg.Done()
		defer close(s.done)
		g.supervise(ctx, spec, cmd)
	}()
	return nil
}

// stopPod stops the processes of pod as stop stops them all (SIGTERM, SIGKILL after
// Grace) and waits until they have exited; the group goes on supervising the others.
func (g *group) stopPod(pod string) {
	g.mu.Lock()
	ss := g.byPod[pod]
	delete(g.byPod, pod)
	g.mu.Unlock()
	for _, s := range ss {
		s.cancel()
	}
	for _, s := range ss {
		<-s.done
	}
}

func (g *group) launch(spec processSpec) (proc, error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log of %s: %w", spec.Role, spec.Pod, err)
	}
	defer logf.Close() // the child holds its own copy
	p, err := g.procs.Start(spec, logf)
	if err != nil {
		return nil, fmt.Errorf("start %s of %s: %w", spec.Role, spec.Pod, err)
	}
	pid := p.PID()
	start, _ := processStart(pid)
	if err := g.jr.add(entry{Kind: "process", PID: pid, Start: start, Role: spec.Role, Pod: spec.Pod}); err != nil {
		g.log.Error("record process", "err", err)
	}
	g.log.Debug("started", "role", spec.Role, "pod", spec.Pod, "pid", pid)
	g.event(EventProcStarted, spec.Pod, fmt.Sprintf("%s of %s started (pid %d)", spec.Role, spec.Pod, pid),
		map[string]any{"role": spec.Role, "pid": pid})
	return p, nil
}

func (g *group) supervise(ctx context.Context, spec processSpec, cmd proc) {
	backoff := 100 * time.Millisecond
	for {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		started := time.Now()
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return
			}
			g.log.Warn("process exited; restarting", "role", spec.Role, "pod", spec.Pod, "err", err, "backoff", backoff)
			status := "exit status 0"
			if err != nil {
				status = err.Error()
			}
			g.event(EventProcExited, spec.Pod, fmt.Sprintf("%s of %s exited (%s); restarting in %s", spec.Role, spec.Pod, status, backoff),
				map[string]any{"role": spec.Role, "pid": cmd.PID(), "error": status, "backoffMs": backoff.Milliseconds()})
			if time.Since(started) > time.Minute {
				backoff = 100 * time.Millisecond
			}
		case <-ctx.Done():
			_ = cmd.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(spec.Grace):
				g.log.Warn("process did not stop in time; killing", "role", spec.Role, "pod", spec.Pod)
				_ = cmd.Signal(syscall.SIGKILL)
				<-done
			}
			return
		}
		next, ok := g.relaunch(ctx, spec, &backoff)
		if !ok {
			return
		}
		cmd = next
	}
}

// relaunch waits out the backoff and starts spec again, retrying until it starts or the
// group stops (ok false).
func (g *group) relaunch(ctx context.Context, spec processSpec, backoff *time.Duration) (proc, bool) {
	for {
		select {
		case <-time.After(*backoff):
		case <-ctx.Done():
			return nil, false
		}
		*backoff = min(*backoff*2, 10*time.Second)
		cmd, err := g.launch(spec)
		if err == nil {
			g.mu.Lock()
			if g.restarts == nil {
				g.restarts = map[string]int{}
			}
			g.restarts[spec.Pod]++
			g.mu.Unlock()
			g.event(EventProcRestart, spec.Pod, fmt.Sprintf("%s of %s restarted (pid %d)", spec.Role, spec.Pod, cmd.PID()),
				map[string]any{"role": spec.Role, "pid": cmd.PID()})
			return cmd, true
		}
		g.log.Error("restart failed", "role", spec.Role, "pod", spec.Pod, "err", err)
	}
}

func (g *group) event(kind, pod, msg string, fields map[string]any) {
	if g.publish != nil {
		g.publish(kind, pod, msg, fields)
	}
}

// restartsOf counts the times pod's processes were started again after they exited.
func (g *group) restartsOf(pod string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.restarts[pod]
}

// stop sends SIGTERM to every process and waits for all of them (SIGKILL after Grace).
// Once stopped, the group starts nothing.
func (g *group) stop() {
	g.mu.Lock()
	g.cancel()
	g.mu.Unlock()
	g.wg.Wait()
}
