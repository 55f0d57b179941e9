package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/dataplane/rqtotals"
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
	// Run writes epoch's bootstrap for the settings s, starts its process, calls started
	// with what it runs and blocks until the process exits. A value on abort stops the
	// process: SIGTERM, then SIGKILL after killGrace. A process that exits on its own
	// with an error returns an *exitError; one that cannot be started at all (binary
	// missing or not executable) returns a *startError.
	Run(epoch int, s agentapi.ProxySettings, abort <-chan error, started func(processInfo)) error
	// Drain asks the running proxy to drain its inbound listeners gracefully.
	Drain(ctx context.Context) error
	// Cleanup removes what epoch left behind (its bootstrap file).
	Cleanup(epoch int)
}

// processInfo is one started proxy process.
type processInfo struct {
	PID       int
	Path      string
	Version   string
	DataPlane string
}

// startError is a proxy that could not be started: retrying will not help.
type startError struct{ Err error }

func (e *startError) Error() string { return e.Err.Error() }
func (e *startError) Unwrap() error { return e.Err }

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
	cfg    Config // defaults applied; the proxy settings come with each Run
	lookup lookup
	launch launcher
	admin  adminClient
	log    *slog.Logger

	mu       sync.Mutex
	versions map[string]string // binary path -> its --version
}

// binary resolves the data plane for s and reads its version once per path.
func (p *envoyProxy) binary(s agentapi.ProxySettings) (proxyBinary, string, error) {
	bin, err := resolveProxy(p.cfg.withSettings(s), p.lookup)
	if err != nil {
		return proxyBinary{}, "", err
	}
	p.mu.Lock()
	v, ok := p.versions[bin.Path]
	p.mu.Unlock()
	if ok {
		return bin, v, nil
	}
	if own, ok := ownProxyVersion(bin, p.lookup); ok {
		v = own
	} else if v, err = proxyVersion(context.Background(), bin, p.launch); err != nil {
		p.log.Warn("read proxy version", "path", bin.Path, "err", err)
		return bin, "", nil // a binary that cannot say its version may still run
	}
	p.mu.Lock()
	if p.versions == nil {
		p.versions = make(map[string]string)
	}
	p.versions[bin.Path] = v
	p.mu.Unlock()
	return bin, v, nil
}

var _ proxy = (*envoyProxy)(nil)

// BuiltinProxyVersion is the first line `meshlab proxy --version` prints (cmd/meshlab's
// tests hold the two equal).
const BuiltinProxyVersion = "meshlab proxy  version: meshlab/1.0.0-dev/Clean/RELEASE/Go"

// ownProxyVersion returns BuiltinProxyVersion when bin is `meshlab proxy` of this very
// executable, whose version the agent knows without starting it: one process start less
// per pod, which a 100-pod `up` felt (every start runs the whole binary's package init).
func ownProxyVersion(bin proxyBinary, l lookup) (string, bool) {
	if bin.DataPlane != agentapi.DataPlaneMeshlabProxy || l.executable == nil {
		return "", false
	}
	self, err := l.executable()
	if err != nil {
		return "", false
	}
	a, errA := os.Stat(self)
	b, errB := os.Stat(bin.Path)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		return "", false
	}
	return BuiltinProxyVersion, true
}

// args returns the proxy's command line for epoch with settings s, after bin.Prefix.
func (p *envoyProxy) args(epoch int, s agentapi.ProxySettings) []string {
	c := p.cfg.withSettings(s)
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
func (p *envoyProxy) command(epoch int, s agentapi.ProxySettings, bin proxyBinary, out, errOut io.Writer) *exec.Cmd {
	args := append(append([]string{}, bin.Prefix...), p.args(epoch, s)...)
	cmd := exec.Command(bin.Path, args...)
	cmd.Dir = p.cfg.RunDir
	cmd.Stdout = out
	cmd.Stderr = errOut
	// Each epoch starts with its collector paused (StartupGCEnv; Envoy ignores it).
	cmd.Env = withStartupGCEnv(os.Environ())
	if bin.DataPlane == agentapi.DataPlaneMeshlabProxy {
		// The lab reads the pod's request totals from this file (dataplane/rqtotals).
		path := filepath.Join(p.cfg.RunDir, rqtotals.File)
		if err := rqtotals.Create(path, int(p.cfg.ProxyUID), int(p.cfg.ProxyGID)); err != nil {
			p.log.Warn("request totals file", "err", err)
		} else {
			cmd.Env = append(cmd.Env, rqtotals.Env+"="+path)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: p.cfg.ProxyUID, Gid: p.cfg.ProxyGID},
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true,
	}
	return cmd
}

func (p *envoyProxy) Run(epoch int, s agentapi.ProxySettings, abort <-chan error, started func(processInfo)) error {
	bin, version, err := p.binary(s)
	if err != nil {
		return &startError{Err: err}
	}
	if _, err := writeBootstrap(p.cfg.withSettings(s), epoch); err != nil {
		// The same settings would give the same bootstrap: retrying cannot help.
		return &startError{Err: fmt.Errorf("write bootstrap of epoch %d: %w", epoch, err)}
	}
	logf, err := os.OpenFile(p.cfg.proxyLogPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open proxy log: %w", err)
	}
	defer logf.Close()
	tail := newLineTail(stderrLines)
	cmd := p.command(epoch, s, bin, logf, io.MultiWriter(logf, tail))

	// Pdeathsig fires when the thread that forked the child exits, not the process; keep
	// this goroutine on its thread until the child is gone so the runtime cannot retire
	// the thread under it (golang/go#27505).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.launch.Start(cmd); err != nil {
		return &startError{Err: fmt.Errorf("start proxy epoch %d: %w", epoch, err)}
	}
	pid := cmd.Process.Pid
	started(processInfo{PID: pid, Path: bin.Path, Version: version, DataPlane: bin.DataPlane})
	p.log.Info("proxy started", "epoch", epoch, "pid", pid, "path", bin.Path, "args", cmd.Args[1:])

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
