package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// killGrace is how long a proxy has to exit after SIGTERM before it gets SIGKILL.
const killGrace = 5 * time.Second

// stderrLines is how many of a proxy's last stderr lines are kept for Status.Message.
const stderrLines = 20

// launcher starts processes; the caller waits for them with cmd.Wait. It exists so that
// tests can swap the binary for the test binary itself (the helper-process pattern).
// Implementations must be safe for concurrent use.
type launcher interface {
	Start(cmd *exec.Cmd) error
}

// execLauncher starts cmd as it is.
type execLauncher struct{}

func (execLauncher) Start(cmd *exec.Cmd) error { return cmd.Start() }

var _ launcher = execLauncher{}

// proxy runs the data plane, one process per epoch, as Istio's pre-2021 envoy.Proxy.
// Run may be called concurrently for different epochs.
type proxy interface {
	// Run writes epoch's bootstrap, starts its process, calls started with the pid and
	// blocks until the process exits. A value on abort stops the process: SIGTERM, then
	// SIGKILL after killGrace. A process that exits on its own with an error returns an
	// *exitError.
	Run(epoch int, abort <-chan error, started func(pid int)) error
	// Drain asks the running proxy to drain its inbound listeners gracefully.
	Drain(ctx context.Context) error
	// Cleanup removes what epoch left behind (its bootstrap file).
	Cleanup(epoch int)
}

// exitError is a proxy process that failed, with its last stderr lines.
type exitError struct {
	Err    error
	Stderr []string
}

func (e *exitError) Error() string { return e.Err.Error() }
func (e *exitError) Unwrap() error { return e.Err }

// exitCode returns the process exit code in err (0 for nil, -1 when killed by a signal
// or unknown).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// envoyProxy runs envoy or `meshlab proxy` with the Istio 1.0-era command line.
type envoyProxy struct {
	cfg    Config // defaults applied
	bin    proxyBinary
	launch launcher
	admin  adminClient
	log    *slog.Logger
}

var _ proxy = (*envoyProxy)(nil)

// args returns the proxy's command line for epoch, after bin.Prefix.
func (p *envoyProxy) args(epoch int) []string {
	c := p.cfg
	return []string{
		"-c", c.bootstrapPath(epoch),
		"--restart-epoch", strconv.Itoa(epoch),
		"--base-id", strconv.FormatUint(uint64(c.BaseID), 10),
		"--drain-time-s", seconds(c.DrainDuration),
		"--parent-shutdown-time-s", seconds(c.ParentShutdownDuration),
		"--service-cluster", c.ServiceCluster,
		"--service-node", c.NodeID,
		"--local-address-ip-version", "v4",
		"--log-level", c.LogLevel,
		"--concurrency", strconv.Itoa(c.Concurrency),
		"--drain-strategy", "immediate",
		"--allow-unknown-static-fields",
	}
}

// command builds epoch's process: uid/gid 1337, its own process group (so a signal to
// the agent's group does not reach it), SIGKILL if the agent dies.
func (p *envoyProxy) command(epoch int, out, errOut io.Writer) *exec.Cmd {
	args := append(append([]string{}, p.bin.Prefix...), p.args(epoch)...)
	cmd := exec.Command(p.bin.Path, args...)
	cmd.Dir = p.cfg.RunDir
	cmd.Stdout = out
	cmd.Stderr = errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: p.cfg.ProxyUID, Gid: p.cfg.ProxyGID},
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true,
	}
	return cmd
}

func (p *envoyProxy) Run(epoch int, abort <-chan error, started func(pid int)) error {
	if _, err := writeBootstrap(p.cfg, epoch); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.cfg.proxyLogPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open proxy log: %w", err)
	}
	defer logf.Close()
	tail := newLineTail(stderrLines)
	cmd := p.command(epoch, logf, io.MultiWriter(logf, tail))

	// Pdeathsig fires when the thread that forked the child exits, not the process; keep
	// this goroutine on its thread until the child is gone so the runtime cannot retire
	// the thread under it (golang/go#27505).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.launch.Start(cmd); err != nil {
		return fmt.Errorf("start proxy epoch %d: %w", epoch, err)
	}
	pid := cmd.Process.Pid
	started(pid)
	p.log.Info("proxy started", "epoch", epoch, "pid", pid, "path", p.bin.Path)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return &exitError{Err: fmt.Errorf("proxy epoch %d exited: %w", epoch, err), Stderr: tail.Lines()}
		}
		return nil
	case reason := <-abort:
		p.log.Info("stopping proxy", "epoch", epoch, "pid", pid, "reason", reason)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case err := <-done:
			return abortResult(err)
		case <-t.C:
			p.log.Warn("proxy ignored SIGTERM, killing it", "epoch", epoch, "pid", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the whole process group
			return abortResult(<-done)
		}
	}
}

// abortResult is what Run returns for a process stopped on purpose: its own exit status,
// which after SIGTERM is usually 0 for envoy and "signal: terminated" otherwise.
func abortResult(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("stopped proxy: %w", err)
}

func (p *envoyProxy) Drain(ctx context.Context) error { return p.admin.drainListeners(ctx) }

func (p *envoyProxy) Cleanup(epoch int) {
	if err := os.Remove(p.cfg.bootstrapPath(epoch)); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Warn("remove bootstrap", "epoch", epoch, "err", err)
	}
}

// maxLineLen caps one kept stderr line, so a proxy writing without newlines cannot make
// the agent grow without bound.
const maxLineLen = 4096

// lineTail is an io.Writer that keeps the last n lines written to it.
type lineTail struct {
	mu      sync.Mutex
	n       int
	lines   []string
	partial strings.Builder
}

func newLineTail(n int) *lineTail { return &lineTail{n: n} }

func (t *lineTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p {
		if b != '\n' {
			if t.partial.Len() < maxLineLen {
				t.partial.WriteByte(b)
			}
			continue
		}
		t.push(t.partial.String())
		t.partial.Reset()
	}
	return len(p), nil
}

func (t *lineTail) push(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

// Lines returns the kept lines, oldest first, including an unterminated last line.
func (t *lineTail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string{}, t.lines...)
	if t.partial.Len() > 0 {
		out = append(out, t.partial.String())
		if len(out) > t.n {
			out = out[len(out)-t.n:]
		}
	}
	return out
}
