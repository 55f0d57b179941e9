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
	"strings"
	"sync"
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
	// decides it from the lab's objects at `up`.
	Ambient bool
	Logger  *slog.Logger
	// OnExit, when set, is called once if istiod exits before Stop, with its error.
	OnExit func(error)
}

// Istiod is a running istiod.
type Istiod struct {
	cmd    *exec.Cmd
	dir    string
	node   string
	client *http.Client
	log    *slog.Logger
	done   chan struct{}
	err    error // set before done closes

	mu       sync.Mutex // serialises Feed
	stopping bool
	refused  error // why istiod refused the last feed; nil once it took one (guarded by mu)
}

// XDSSocket and feedSocket are istiod's sockets in the lab's run directory.
func XDSSocket(dir string) string  { return filepath.Join(dir, "istiod-xds.sock") }
func feedSocket(dir string) string { return filepath.Join(dir, "istiod.sock") }

// LogPath is istiod's log in the lab's run directory.
func LogPath(dir string) string { return filepath.Join(dir, "istiod.log") }

// Start runs istiod with the lab's objects and returns once it serves ADS and its feed.
func Start(ctx context.Context, o Options) (*Istiod, error) {
	state, err := Objects(o.Model, o.Node)
	if err != nil {
		return nil, fmt.Errorf("istiod: the lab's objects: %w", err)
	}
	mesh, err := MeshConfig(o.Model.Mesh)
	if err != nil {
		return nil, fmt.Errorf("istiod: mesh config: %w", err)
	}
	stateFile, meshFile := filepath.Join(o.Dir, "istiod-state.yaml"), filepath.Join(o.Dir, "istiod-mesh.yaml")
	if err := os.WriteFile(stateFile, state, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(meshFile, mesh, 0o600); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(LogPath(o.Dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Path, "--xds", XDSSocket(o.Dir), "--feed", feedSocket(o.Dir), "--state", stateFile, "--mesh", meshFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), fmt.Sprintf("PILOT_ENABLE_AMBIENT=%t", o.Ambient))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sock := feedSocket(o.Dir)
	d := &Istiod{cmd: cmd, dir: o.Dir, node: o.Node, log: o.Logger, done: make(chan struct{}), client: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}}
	// Pdeathsig fires when the thread that forked istiod exits, not the lab process, and
	// the runtime retires a thread whenever a goroutine ends locked to it (the lab's
	// netns and sandbox work does): istiod was killed 150 ms after its start in CI. So one
	// goroutine, locked to its thread, starts istiod and waits for it (golang/go#27505).
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
		d.mu.Lock()
		stopping := d.stopping
		d.mu.Unlock()
		d.err = err
		close(d.done)
		if !stopping && o.OnExit != nil {
			o.OnExit(fmt.Errorf("istiod exited: %w (see %s)", err, LogPath(o.Dir)))
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Path, err)
	}
	if err := d.waitReady(ctx, 2*time.Minute); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// Ambient reports whether a lab of m runs istiod with ambient on: when a pod or a
// namespace is in ambient mode (istio.io/dataplane-mode=ambient) or a waypoint is
// declared, as a cluster with ambient pods was installed with the ambient profile. It is
// decided once, at `up` (istiod reads the switch at its start): a lab that enrolls its
// first namespace later, on an istiod started without ambient, has its ztunnel refused.
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

// waitReady waits for istiod's ADS socket and feed.
func (d *Istiod) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(XDSSocket(d.dir)); err == nil {
			if _, err := d.get(ctx, "/healthz"); err == nil {
				return nil
			}
		}
		select {
		case <-d.done:
			return fmt.Errorf("istiod exited while starting: %w; its log (%s):\n%s", d.err, LogPath(d.dir), tail(LogPath(d.dir)))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("istiod did not serve within %s; its log: %s", timeout, LogPath(d.dir))
		}
	}
}

// Feed makes istiod's objects the model's: what is new is created, what changed updated,
// what is gone deleted, each a watch event to istiod's controllers. The mesh config
// travels in the istio ConfigMap (MeshConfigMap), which meshlab-istiod sets on istiod's
// mesh watcher before the other changes, pushing every proxy in full, as istiod's mesh
// handler does.
func (d *Istiod) Feed(ctx context.Context, m *model.Model) error {
	state, err := Objects(m, d.node)
	if err != nil {
		return fmt.Errorf("istiod: the lab's objects: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.put(ctx, "/state", state); err != nil {
		d.refused = fmt.Errorf("istiod refused the lab's objects: %w", err)
		return d.refused
	}
	d.refused = nil
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

// PID is istiod's process id.
func (d *Istiod) PID() int { return d.cmd.Process.Pid }

// Exited returns why istiod exited (nil while it runs): its exit status, with where its
// log is.
func (d *Istiod) Exited() error {
	select {
	case <-d.done:
		return fmt.Errorf("istiod exited: %w (see %s)", d.err, LogPath(d.dir))
	default:
		return nil
	}
}

// Running reports whether istiod has not exited.
func (d *Istiod) Running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// Stop ends istiod (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (d *Istiod) Stop() {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
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
