package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestAgentSocket(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" host="+r.Host)
		mu.Unlock()
		fmt.Fprintf(w, "admin %s %s\n", r.Method, r.URL.Path)
	}))
	t.Cleanup(admin.Close)
	adminPort := uint16(admin.Listener.Addr().(*net.TCPAddr).Port)

	path := filepath.Join(t.TempDir(), "agent.sock")
	if err := os.WriteFile(path, nil, 0o644); err != nil { // a stale file from a killed agent
		t.Fatal(err)
	}
	ln, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("agent.sock = %v %v, want a socket with mode 0600", fi.Mode(), err)
	}
	status := func(context.Context) agentapi.Status {
		return agentapi.Status{Pod: "backend-v1", Ready: true, DataPlane: agentapi.DataPlaneMeshlabProxy, Epochs: []agentapi.EpochStatus{{Epoch: 0, PID: 42, State: agentapi.EpochLive}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, ln, sockHandler(status, neverChanges, nopRestarter{}, adminPort, testutil.Logger(t)))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	c := unixClient(path)

	st, err := getStatus(c)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pod != "backend-v1" || !st.Ready || len(st.Epochs) != 1 || st.Epochs[0].PID != 42 {
		t.Errorf("status = %+v", st)
	}

	for _, tc := range []struct {
		method, url, wantBody, wantSeen string
	}{
		{method: "GET", url: "http://agent/admin/config_dump?include_eds", wantBody: "admin GET /config_dump\n",
			wantSeen: "GET /config_dump?include_eds host=127.0.0.1:" + fmt.Sprint(adminPort)},
		{method: "POST", url: "http://agent/admin/drain_listeners?inboundonly&graceful", wantBody: "admin POST /drain_listeners\n",
			wantSeen: "POST /drain_listeners?inboundonly&graceful host=127.0.0.1:" + fmt.Sprint(adminPort)},
		{method: "GET", url: "http://agent/admin/stats?filter=%5Ecluster%5C.", wantBody: "admin GET /stats\n",
			wantSeen: "GET /stats?filter=%5Ecluster%5C. host=127.0.0.1:" + fmt.Sprint(adminPort)},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != tc.wantBody {
			t.Errorf("%s %s = %d %q, want %q", tc.method, tc.url, resp.StatusCode, body, tc.wantBody)
		}
		mu.Lock()
		last := seen[len(seen)-1]
		mu.Unlock()
		if last != tc.wantSeen {
			t.Errorf("admin saw %q, want %q", last, tc.wantSeen)
		}
	}

	// Only GET and POST reach the admin API; other paths are not served.
	for _, tc := range []struct{ method, url string }{{"DELETE", "http://agent/admin/clusters"}, {"GET", "http://agent/other"}} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("%s %s answered 200", tc.method, tc.url)
		}
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 3 {
		t.Errorf("admin saw %d requests, want 3", n)
	}

	// With the proxy's admin down, the lab gets 502 and a reason.
	admin.Close()
	resp, err := c.Get("http://agent/admin/ready")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "proxy admin not reachable") {
		t.Errorf("admin down: %d %q", resp.StatusCode, body)
	}
}

// nopRestarter answers every restart with nothing started.
type nopRestarter struct{}

func (nopRestarter) Restart(context.Context, *agentapi.ProxySettings) (agentapi.RestartResult, error) {
	return agentapi.RestartResult{Epoch: -1}, nil
}

// neverChanges is a changes func for handlers whose status never changes.
func neverChanges() <-chan struct{} { return nil }

// waitableStatus is a status that a test changes, announcing each change as the epoch
// manager does.
type waitableStatus struct {
	mu      sync.Mutex
	st      agentapi.Status
	changed chan struct{}
	reads   int
}

func (w *waitableStatus) status(context.Context) agentapi.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	st := w.st
	st.Epochs = slices.Clone(w.st.Epochs) // the handler reads it after set changed w.st's
	return st
}

func (w *waitableStatus) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *waitableStatus) set(f func(*agentapi.Status)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.st)
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *waitableStatus) readCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads
}

// TestStatusWaitReady holds GET /status?wait=ready to its contract: it answers when a
// change makes the pod ready or failed, not before and without asking again and again
// while nothing changes; after ?timeout with the status as it is; and refuses a bad
// condition or timeout by name.
func TestStatusWaitReady(t *testing.T) {
	ws := &waitableStatus{st: agentapi.Status{Pod: "p", Epochs: []agentapi.EpochStatus{{Epoch: 0, State: agentapi.EpochStarting}}}, changed: make(chan struct{})}
	h := sockHandler(ws.status, ws.changes, nopRestarter{}, 1, testutil.Logger(t))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(query string) (int, agentapi.Status, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/status" + query)
		if err != nil {
			t.Error(err)
			return 0, agentapi.Status{}, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var st agentapi.Status
		_ = json.Unmarshal(body, &st)
		return resp.StatusCode, st, string(body)
	}

	type answer struct {
		st   agentapi.Status
		took time.Duration
	}
	waited := func(f func(*agentapi.Status)) answer {
		t.Helper()
		start := time.Now()
		got := make(chan answer, 1)
		go func() {
			_, st, _ := get("?wait=ready&timeout=20s")
			got <- answer{st, time.Since(start)}
		}()
		time.Sleep(300 * time.Millisecond)
		select {
		case a := <-got:
			t.Fatalf("answered before any change: %+v", a.st)
		default:
		}
		if n := ws.readCount(); n > 2 {
			t.Errorf("status read %d times while nothing changed, want at most 2 (no polling)", n)
		}
		ws.set(f)
		select {
		case a := <-got:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no answer 10s after the change")
			return answer{}
		}
	}

	a := waited(func(s *agentapi.Status) { s.Ready, s.Epochs[0].State = true, agentapi.EpochLive })
	if !a.st.Ready || a.took > 5*time.Second {
		t.Errorf("wait for ready = %+v after %s, want ready soon after the change", a.st, a.took)
	}

	ws.set(func(s *agentapi.Status) { *s = agentapi.Status{Pod: "p"} })
	ws.mu.Lock()
	ws.reads = 0
	ws.mu.Unlock()
	a = waited(func(s *agentapi.Status) { s.Failed, s.Message = true, "proxy cannot be started" })
	if a.st.Ready || !a.st.Failed || a.st.Message != "proxy cannot be started" {
		t.Errorf("wait for a failing pod = %+v, want failed with its message", a.st)
	}

	ws.set(func(s *agentapi.Status) { *s = agentapi.Status{Pod: "p"} })
	start := time.Now()
	if code, st, _ := get("?wait=ready&timeout=200ms"); code != http.StatusOK || st.Ready || st.Pod != "p" {
		t.Errorf("timed-out wait = %d %+v, want 200 with the not-ready status", code, st)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("timed-out wait took %s, want about 200ms", took)
	}

	for _, tc := range []struct{ name, query, want string }{
		{name: "unknown condition", query: "?wait=live", want: `wait=\"live\"`},
		{name: "bad timeout", query: "?wait=ready&timeout=soon", want: `timeout=\"soon\"`},
		{name: "timeout too long", query: "?wait=ready&timeout=2h", want: `timeout=\"2h\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := get(tc.query)
			if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("GET /status%s = %d %s, want 400 naming %s", tc.query, code, body, tc.want)
			}
		})
	}
}
