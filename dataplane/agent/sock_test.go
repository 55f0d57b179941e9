package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
	status := func(context.Context) Status {
		return Status{Pod: "backend-v1", Ready: true, DataPlane: DataPlaneMeshlabProxy, Epochs: []EpochStatus{{Epoch: 0, PID: 42, State: EpochLive}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveHTTP(ctx, ln, sockHandler(status, nopRestarter{}, adminPort, testutil.Logger(t))) }()
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

func (nopRestarter) Restart(context.Context, *ProxySettings) (RestartResult, error) {
	return RestartResult{Epoch: -1}, nil
}
