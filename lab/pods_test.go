package lab

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/demoapp"
)

// fakeAgentSock serves GET /status on a pod's agent.sock. With push set it holds
// ?wait=ready requests until the status is ready or failed or ?timeout passes, as the
// agent does; without it, it answers at once (an agent that cannot push).
type fakeAgentSock struct {
	push bool

	mu       sync.Mutex
	st       agentapi.Status
	changed  chan struct{}
	requests int
}

func (f *fakeAgentSock) set(st agentapi.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeAgentSock) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeAgentSock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	f.mu.Unlock()
	var deadline <-chan time.Time
	if f.push && r.URL.Query().Get("wait") == "ready" {
		d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		deadline = time.After(d)
	}
	for {
		f.mu.Lock()
		st, changed := f.st, f.changed
		f.mu.Unlock()
		if deadline == nil || st.Ready || st.Failed {
			_ = json.NewEncoder(w).Encode(st)
			return
		}
		select {
		case <-changed:
		case <-deadline:
			deadline = nil
		case <-r.Context().Done():
			return
		}
	}
}

// serveFakeAgent binds pod's agent.sock of l (after delay, as an agent that is still
// starting) and serves f on it until the test ends.
func serveFakeAgent(t *testing.T, l *Lab, pod string, f *fakeAgentSock, delay time.Duration) {
	t.Helper()
	sock := l.paths.AgentSocket(pod)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		select {
		case <-time.After(delay):
		case <-stop:
			return
		}
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Error(err)
			return
		}
		_ = srv.Serve(ln)
	})
	t.Cleanup(func() {
		close(stop)
		_ = srv.Close()
		wg.Wait()
	})
}

func testLab(t *testing.T, readyTimeout time.Duration) *Lab {
	t.Helper()
	root, err := os.MkdirTemp("", "ml-ready-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return &Lab{paths: PathsFor(root, "x"), opts: Options{ReadyTimeout: readyTimeout}}
}

// TestWaitReady holds the lab's wait for a pod to its contract: an agent that pushes is
// asked once and answered when its proxy becomes ready; one that cannot push, or is not
// listening yet, is asked again with a bounded backoff, not every 20 ms; a failed proxy
// or the ready timeout end the wait with the agent's reason.
func TestWaitReady(t *testing.T) {
	notReady := agentapi.Status{Pod: "p", Message: "not ready: proxy epoch 0 is starting"}
	ready := agentapi.Status{Pod: "p", Ready: true}

	t.Run("push", func(t *testing.T) {
		l := testLab(t, 20*time.Second)
		f := &fakeAgentSock{push: true, st: notReady, changed: make(chan struct{})}
		serveFakeAgent(t, l, "p", f, 0)
		var said atomic.Bool // the agent said ready: set before it says so
		time.AfterFunc(500*time.Millisecond, func() { said.Store(true); f.set(ready) })
		if err := l.waitReady(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		if !said.Load() {
			t.Error("ready before the agent said so")
		}
		if n := f.count(); n != 1 {
			t.Errorf("agent asked %d times, want once (it pushes)", n)
		}
	})

	t.Run("fallback", func(t *testing.T) {
		l := testLab(t, 20*time.Second)
		f := &fakeAgentSock{st: notReady, changed: make(chan struct{})}
		serveFakeAgent(t, l, "p", f, 200*time.Millisecond) // not listening at first
		time.AfterFunc(1500*time.Millisecond, func() { f.set(ready) })
		if err := l.waitReady(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		// 1.3 s of answers at once: a 20 ms poll asks 65 times; the backoff (10 ms
		// doubling to 250 ms) about 8.
		if n := f.count(); n < 2 || n > 15 {
			t.Errorf("agent that cannot push asked %d times in 1.3s, want 2-15", n)
		}
	})

	t.Run("failed", func(t *testing.T) {
		l := testLab(t, 20*time.Second)
		f := &fakeAgentSock{push: true, st: notReady, changed: make(chan struct{})}
		serveFakeAgent(t, l, "p", f, 0)
		time.AfterFunc(100*time.Millisecond, func() {
			f.set(agentapi.Status{Pod: "p", Failed: true, Message: "last unexpected proxy exit: proxy cannot be started: exec /nope: no such file"})
		})
		err := l.waitReady(t.Context(), "p")
		var nr *notReadyError
		if !errors.As(err, &nr) || !errors.Is(err, errPodFailed) || !strings.Contains(err.Error(), "exec /nope") {
			t.Errorf("waitReady = %v, want a notReadyError (proxy failed) with the agent's reason", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		l := testLab(t, time.Second)
		f := &fakeAgentSock{push: true, st: notReady, changed: make(chan struct{})}
		serveFakeAgent(t, l, "p", f, 0)
		ctx, cancel := context.WithTimeout(t.Context(), l.opts.ReadyTimeout)
		defer cancel()
		err := l.waitReady(ctx, "p")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not ready within 1s: not ready: proxy epoch 0 is starting") {
			t.Errorf("waitReady = %v, want the ready timeout with the agent's reason", err)
		}
		if n := f.count(); n > 6 {
			t.Errorf("agent asked %d times in 1s, want at most 6 (it pushes; a 20 ms poll asks 50)", n)
		}
	})
}

// An app runs as meshlab-app when that binary sits beside meshlab, except the personas
// only meshlab links (fortio, grpc-echo); without it every app is `meshlab app`.
func TestAppArgvRunsTheSmallAppBesideMeshlab(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // the apps' uids must be able to enter it
		t.Fatal(err)
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by other users: the lab would not run binaries under it", d)
		}
	}
	meshlab := filepath.Join(dir, "meshlab")
	if err := os.WriteFile(meshlab, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pod := &model.Pod{Name: "web-0", Namespace: "default", Labels: map[string]string{"app": "web"}, Ports: []uint16{8080}}
	fortio := &model.Pod{Name: "fortio-0", Namespace: "default", Ports: []uint16{8080}, App: model.AppSpec{Persona: demoapp.PersonaFortio}}
	l := &Lab{opts: Options{MeshlabPath: meshlab}, model: model.New(nil, []*model.Pod{pod, fortio})}
	if got := l.appArgv(pod); got[0] != meshlab || got[1] != "app" {
		t.Errorf("without meshlab-app: argv %q, want meshlab app", got)
	}
	small := filepath.Join(dir, SmallAppName)
	if err := os.WriteFile(small, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := l.appArgv(pod)
	if got[0] != small || !slices.Contains(got, "--pod=web-0") || slices.Contains(got, "app") {
		t.Errorf("with meshlab-app: argv %q, want %s and the app's flags", got, small)
	}
	if got := l.appArgv(fortio); got[0] != meshlab || got[1] != "app" {
		t.Errorf("fortio persona: argv %q, want meshlab app (meshlab-app does not link it)", got)
	}
	if err := os.Chmod(small, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := l.appArgv(pod); got[0] != meshlab {
		t.Errorf("meshlab-app not executable by the apps' uids: argv %q, want meshlab app", got)
	}
}
