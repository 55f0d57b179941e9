// Package istiodcp runs Istio's own istiod as a lab's control plane (`up
// --control-plane=istiod`): it finds the meshlab-istiod binary (built from the module
// istiod/ by `make istiod`, so that istio.io/istio never enters meshlab), starts it with
// the lab's objects, keeps it fed with every change as Kubernetes objects (kube.go), and
// reaches its debug endpoints. The lab's discovery server relays its proxies'
// authenticated streams to istiod's ADS socket (controlplane/discovery's relay).
package istiodcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Binary is the name of istiod's binary, found beside meshlab, on PATH or by flag.
const Binary = "meshlab-istiod"

// Control planes a lab can run.
const (
	ControlPlaneMeshlab = "meshlab" // meshlab's own generator (controlplane/xds), the default
	ControlPlaneIstiod  = "istiod"  // Istio's istiod, through meshlab-istiod
)

// ErrNotFound is returned by Find when no meshlab-istiod binary is found.
var ErrNotFound = errors.New(Binary + " not found beside meshlab or on PATH: build it with `make istiod` (bin/" + Binary +
	"; `make istiod ISTIO_VERSION=<istio.io/istio module version>` for another Istio) or name it with --istiod-path")

// Find returns the istiod binary to run: path when given, else meshlab-istiod beside the
// meshlab binary, else on PATH.
func Find(path, meshlabPath string) (string, error) {
	if path != "" {
		if err := executable(path); err != nil {
			return "", fmt.Errorf("--istiod-path %s: %w", path, err)
		}
		return path, nil
	}
	if meshlabPath != "" {
		if p := filepath.Join(filepath.Dir(meshlabPath), Binary); executable(p) == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(Binary); err == nil {
		return p, nil
	}
	return "", ErrNotFound
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}

// Options start an istiod.
type Options struct {
	Path  string       // the binary (Find)
	Dir   string       // the lab's run directory: sockets, state, istiod.log
	Model *model.Model // the lab's objects at start
	// Node is the lab's node (ml-<lab>-node): every pod is scheduled on it (spec.nodeName),
	// which istiod sends as a WDS Workload's node, the one ztunnel's NODE_NAME serves.
	Node string
	// Ambient runs istiod with ambient on (PILOT_ENABLE_AMBIENT=true, as an ambient
	// install sets it; istiod reads it once, at start): its ambient index, WDS for
	// ztunnel, and HBONE toward ambient pods in the sidecars' config. Ambient (below)
	// decides it from the lab's objects; an istiod started without it is restarted with
	// it by the first Feed of a lab that has turned ambient.
	Ambient bool
	Logger  *slog.Logger
	// OnExit, when set, is called once if istiod exits before Stop, with its error.
	OnExit func(error)
	// OnRestart, when set, is called after istiod was restarted (Feed), with why and its
	// new process id. It must not wait for the Feed that restarted istiod.
	OnRestart func(reason string, pid int)
}

// Istiod is a running istiod: one process at a time, replaced by Feed when the lab first
// turns ambient.
type Istiod struct {
	opts   Options
	client *http.Client
	proc   atomic.Pointer[process]

	mu      sync.Mutex // serialises Feed, restarts and Stop
	ambient bool       // the running process has ambient on (guarded by mu)
	// trustDomains are the mesh's trust domain and aliases the running process was
	// started with (guarded by mu; nil before a start).
	trustDomains []string
	stopped      bool  // Stop was called (guarded by mu)
	refused      error // why istiod refused the last feed; nil once it took one (guarded by mu)
}

// process is one istiod process.
type process struct {
	cmd      *exec.Cmd
	done     chan struct{}
	err      error       // set before done closes
	stopping atomic.Bool // ended on purpose (Stop, a restart): no OnExit
}

// XDSSocket and feedSocket are istiod's sockets in the lab's run directory.
func XDSSocket(dir string) string  { return filepath.Join(dir, "istiod-xds.sock") }
func feedSocket(dir string) string { return filepath.Join(dir, "istiod.sock") }

// LogPath is istiod's log in the lab's run directory.
func LogPath(dir string) string { return filepath.Join(dir, "istiod.log") }

// Start runs istiod with the lab's objects and returns once it serves ADS and its feed.
func Start(ctx context.Context, o Options) (*Istiod, error) {
	sock := feedSocket(o.Dir)
	d := &Istiod{opts: o, ambient: o.Ambient, client: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}}
	if err := d.start(ctx, o.Model, o.Ambient); err != nil {
		return nil, err
	}
	return d, nil
}

// start runs one istiod process with m's objects and waits until it serves.
func (d *Istiod) start(ctx context.Context, m *model.Model, ambient bool) error {
	o := d.opts
	state, err := Objects(m, o.Node)
	if err != nil {
		return fmt.Errorf("istiod: the lab's objects: %w", err)
	}
	mesh, err := MeshConfig(m.Mesh)
	if err != nil {
		return fmt.Errorf("istiod: mesh config: %w", err)
	}
	d.trustDomains = m.Mesh.TrustDomains()
	stateFile, meshFile := filepath.Join(o.Dir, "istiod-state.yaml"), filepath.Join(o.Dir, "istiod-mesh.yaml")
	if err := os.WriteFile(stateFile, state, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(meshFile, mesh, 0o600); err != nil {
		return err
	}
	logf, err := os.OpenFile(LogPath(o.Dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(o.Path, "--xds", XDSSocket(o.Dir), "--feed", feedSocket(o.Dir), "--state", stateFile, "--mesh", meshFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), fmt.Sprintf("PILOT_ENABLE_AMBIENT=%t", ambient))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, done: make(chan struct{})}
	// Pdeathsig fires when the thread that forked istiod exits, not the lab process, and
	// the runtime retires a thread whenever a goroutine ends locked to it (the lab's
	// netns and sandbox work does): istiod was killed 150 ms after its start in CI. So one
	// goroutine, locked to its thread, starts istiod and waits for it (golang/go#27505);
	// a restarted istiod gets a goroutine of its own.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		if err == nil {
			// istiod never ends by itself; an exit with status 0 is still one.
			err = errExitedCleanly
		}
		p.err = err
		close(p.done)
		if !p.stopping.Load() && o.OnExit != nil {
			o.OnExit(fmt.Errorf("istiod exited: %w (see %s)", err, LogPath(o.Dir)))
		}
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", o.Path, err)
	}
	d.proc.Store(p)
	if err := d.waitReady(ctx, p, 2*time.Minute); err != nil {
		p.stop()
		return err
	}
	return nil
}

// Ambient reports whether a lab of m runs istiod with ambient on: when a pod or a
// namespace is in ambient mode (istio.io/dataplane-mode=ambient) or a waypoint is
// declared, as a cluster with ambient pods was installed with the ambient profile.
// istiod reads the switch once, at its start: a lab that turns ambient after `up`
// (Getting Started labels its namespace once Bookinfo runs, a waypoint is applied) has
// its istiod restarted by Feed.
func Ambient(m *model.Model) bool {
	if len(m.Waypoints) > 0 {
		return true
	}
	for _, ns := range m.Namespaces {
		if ns.Labels[model.LabelDataplaneMode] == model.DataplaneModeAmbient {
			return true
		}
	}
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient {
			return true
		}
	}
	return false
}

// errExitedCleanly is istiod's exit with status 0, which is still an end it should not reach.
var errExitedCleanly = errors.New("exit status 0")

// waitReady waits for p's ADS socket and feed.
func (d *Istiod) waitReady(ctx context.Context, p *process, timeout time.Duration) error {
	dir := d.opts.Dir
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(XDSSocket(dir)); err == nil {
			if _, err := d.get(ctx, "/healthz"); err == nil {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("istiod exited while starting: %w; its log (%s):\n%s", p.err, LogPath(dir), tail(LogPath(dir)))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("istiod did not serve within %s; its log: %s", timeout, LogPath(dir))
		}
	}
}

// Feed makes istiod's objects the model's: what is new is created, what changed updated,
// what is gone deleted, each a watch event to istiod's controllers. The mesh config
// travels in the istio ConfigMap (MeshConfigMap), which meshlab-istiod sets on istiod's
// mesh watcher before the other changes, pushing every proxy in full, as istiod's mesh
// handler does.
//
// When m has turned ambient and the running istiod was started without it, Feed
// restarts istiod with ambient on and m's objects, as an ambient install rolls istiod
// out with PILOT_ENABLE_AMBIENT: the proxies' streams to it end, and each proxy
// reconnects, is sent the new istiod's config and ACKs it, as after any istiod restart.
func (d *Istiod) Feed(ctx context.Context, m *model.Model) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	if !d.ambient && Ambient(m) {
		return d.restartLocked(ctx, m, "the lab turned ambient: istiod restarted with PILOT_ENABLE_AMBIENT=true", true)
	}
	if d.trustDomains != nil && !slices.Equal(d.trustDomains, m.Mesh.TrustDomains()) {
		// istiod names its workloads' identities (the SANs of its clusters) in the trust
		// domain it read when it started; a lab is installed into with the trust domain
		// (istioctl install --set meshConfig.trustDomain=...), which in a cluster starts
		// istiod with it, so the lab restarts istiod with the new one.
		return d.restartLocked(ctx, m, "the mesh's trust domain changed ("+strings.Join(m.Mesh.TrustDomains(), ", ")+"): istiod restarted with it", d.ambient)
	}
	state, err := Objects(m, d.opts.Node)
	if err != nil {
		return fmt.Errorf("istiod: the lab's objects: %w", err)
	}
	if err := d.put(ctx, "/state", state); err != nil {
		d.refused = fmt.Errorf("istiod refused the lab's objects: %w", err)
		return d.refused
	}
	d.refused = nil
	return nil
}

// Restart replaces the running istiod by a new one started with m's objects (ambient on
// as it was, or when m has turned ambient), as a rollout restart of istiod's Deployment:
// the proxies' streams to it end and each reconnects to the new one.
func (d *Istiod) Restart(ctx context.Context, m *model.Model, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errors.New("istiod: stopped")
	}
	return d.restartLocked(ctx, m, reason, d.ambient || Ambient(m))
}

// restartLocked replaces the running istiod by one started with m's objects, ambient on
// or off. The caller holds d.mu.
func (d *Istiod) restartLocked(ctx context.Context, m *model.Model, reason string, ambient bool) error {
	if old := d.proc.Load(); old != nil {
		old.stop()
	}
	if d.opts.Logger != nil {
		d.opts.Logger.Info(reason)
	}
	if err := d.start(ctx, m, ambient); err != nil {
		err = fmt.Errorf("istiod: restart (ambient %v): %w", ambient, err)
		d.refused = err
		if d.opts.OnExit != nil {
			d.opts.OnExit(err)
		}
		return err
	}
	d.ambient, d.refused = ambient, nil
	if d.opts.OnRestart != nil {
		d.opts.OnRestart(reason, d.PID())
	}
	return nil
}

// Refused returns why istiod refused the lab's last objects (nil when it took them):
// until a later feed is taken, istiod and the proxies keep the config it last had, as a
// cluster's istiod keeps its last good config when an update fails.
func (d *Istiod) Refused() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

// put sends body to istiod's feed at path.
func (d *Istiod) put(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://istiod"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("feed %s: %w", path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", strings.TrimSpace(string(answer)))
	}
	return nil
}

// Version is the Istio version istiod was built from.
func (d *Istiod) Version(ctx context.Context) (string, error) {
	b, err := d.get(ctx, "/version")
	return strings.TrimSpace(string(b)), err
}

// Debug returns one of istiod's debug endpoints (path and query, e.g.
// "/debug/config_dump?proxyID=..."), as istioctl x internal-debug reads them.
func (d *Istiod) Debug(ctx context.Context, pathAndQuery string) ([]byte, error) {
	if !strings.HasPrefix(pathAndQuery, "/debug/") {
		return nil, fmt.Errorf("%q is not one of istiod's debug endpoints (/debug/...)", pathAndQuery)
	}
	return d.get(ctx, pathAndQuery)
}

func (d *Istiod) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://istiod"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("istiod %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, err
}

// PID is the running istiod's process id.
func (d *Istiod) PID() int { return d.proc.Load().cmd.Process.Pid }

// Exited returns why istiod exited (nil while it runs): its exit status, with where its
// log is.
func (d *Istiod) Exited() error {
	p := d.proc.Load()
	select {
	case <-p.done:
		return fmt.Errorf("istiod exited: %w (see %s)", p.err, LogPath(d.opts.Dir))
	default:
		return nil
	}
}

// Running reports whether istiod has not exited.
func (d *Istiod) Running() bool { return d.Exited() == nil }

// Stop ends istiod (SIGTERM, then SIGKILL after 5 s) and waits for it; a later Feed does
// nothing.
func (d *Istiod) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if p := d.proc.Load(); p != nil {
		p.stop()
	}
}

// stop ends p (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (p *process) stop() {
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last lines of a file, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
