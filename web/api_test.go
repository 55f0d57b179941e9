package web

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBackend answers from fixed data; its name table changes when bump is closed.
type fakeBackend struct {
	bump chan struct{}
}

func (f *fakeBackend) Info() api.LabInfo { return api.LabInfo{Name: "demo", PID: 42} }

func (f *fakeBackend) Pods(context.Context) ([]api.PodStatus, error) {
	return []api.PodStatus{{Name: "backend-v1", IP: netip.MustParseAddr("10.244.0.3"), Ready: true, RequestsIn: 7}}, nil
}

func (f *fakeBackend) NameTable(ctx context.Context, pod string, version uint64) (api.NameTable, error) {
	if pod != "backend-v1" {
		return api.NameTable{}, api.ErrUnknownPod
	}
	t := api.NameTable{Version: 1, Names: map[string][]netip.Addr{"backend": {netip.MustParseAddr("10.96.0.10")}}}
	if version != t.Version {
		return t, nil
	}
	select {
	case <-f.bump:
		t.Version = 2
	case <-ctx.Done():
	}
	return t, nil
}

func newTestServer(t *testing.T, b Backend) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler(b, testutil.Logger(t)))
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, url string, want int, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d", url, resp.StatusCode, want)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLabAndPods(t *testing.T) {
	srv := newTestServer(t, &fakeBackend{})
	var info api.LabInfo
	getJSON(t, srv.URL+"/v1/lab", http.StatusOK, &info)
	if info.Name != "demo" || info.PID != 42 {
		t.Errorf("lab = %+v", info)
	}
	var pods []api.PodStatus
	getJSON(t, srv.URL+"/v1/pods", http.StatusOK, &pods)
	if len(pods) != 1 || pods[0].Name != "backend-v1" || pods[0].RequestsIn != 7 || pods[0].IP.String() != "10.244.0.3" {
		t.Errorf("pods = %+v", pods)
	}
}

func TestNameTableLongPoll(t *testing.T) {
	b := &fakeBackend{bump: make(chan struct{})}
	srv := newTestServer(t, b)

	// A stale version answers at once.
	var nt api.NameTable
	getJSON(t, srv.URL+"/v1/agents/backend-v1/nametable?version=0", http.StatusOK, &nt)
	if nt.Version != 1 || nt.Names["backend"][0].String() != "10.96.0.10" {
		t.Fatalf("name table = %+v", nt)
	}
	// The current version is held until the table changes.
	got := make(chan api.NameTable, 1)
	go func() {
		var nt api.NameTable
		resp, err := http.Get(srv.URL + "/v1/agents/backend-v1/nametable?version=1")
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&nt)
			resp.Body.Close()
		}
		got <- nt
	}()
	select {
	case nt := <-got:
		t.Fatalf("long poll answered before any change: %+v", nt)
	case <-time.After(100 * time.Millisecond):
	}
	close(b.bump)
	select {
	case nt := <-got:
		if nt.Version != 2 {
			t.Errorf("after the change, version = %d, want 2", nt.Version)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll not answered after the change")
	}
}

func TestNameTableErrors(t *testing.T) {
	srv := newTestServer(t, &fakeBackend{})
	getJSON(t, srv.URL+"/v1/agents/nope/nametable", http.StatusNotFound, nil)
	getJSON(t, srv.URL+"/v1/agents/backend-v1/nametable?version=x", http.StatusBadRequest, nil)
}

func TestUnixClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, NewHandler(&fakeBackend{}, testutil.Logger(t))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c := api.NewUnixClient(sock)
	defer c.Close()
	pods, err := c.Pods(ctx)
	if err != nil || len(pods) != 1 {
		t.Fatalf("Pods = %v, %v", pods, err)
	}
	info, err := c.Lab(ctx)
	if err != nil || info.Name != "demo" {
		t.Fatalf("Lab = %v, %v", info, err)
	}
}

// metricsBackend is a fakeBackend that also writes metrics.
type metricsBackend struct{ fakeBackend }

func (metricsBackend) WriteMetrics(_ context.Context, w io.Writer) error {
	_, err := io.WriteString(w, "# TYPE meshlab_xds_connected_proxies gauge\nmeshlab_xds_connected_proxies 3\n")
	return err
}

func TestMetricsEndpointOnlyWhenTheBackendWritesMetrics(t *testing.T) {
	srv := newTestServer(t, &metricsBackend{})
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") ||
		!strings.Contains(string(body), "meshlab_xds_connected_proxies 3") {
		t.Errorf("GET /metrics = %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	getJSON(t, newTestServer(t, &fakeBackend{}).URL+"/metrics", http.StatusNotFound, nil)
}
