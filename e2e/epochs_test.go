package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// restartsUnderLoad is how many new epochs the restart tests start.
const restartsUnderLoad = 10

// TestProxyRestartsUnderLoad hot-restarts the frontend's sidecar (the built-in data
// plane) 10 times while a steady stream of requests goes through it, and asserts that no
// request failed and that every epoch but the last exited cleanly.
func TestProxyRestartsUnderLoad(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	proxyRestartsUnderLoad(t, 200)
}

// TestProxyRestartsUnderLoadEnvoy is the same test against real Envoy. It is skipped,
// saying so, when Envoy is not installed.
func TestProxyRestartsUnderLoadEnvoy(t *testing.T) {
	testutil.RequireRoot(t)
	envoy, ok := findEnvoy()
	if !ok {
		t.Skip("real Envoy is not installed ($MESHLAB_ENVOY, envoy on PATH, func-e's versions): " +
			"the restart test did NOT run against Envoy; install one with `meshlab envoy install`")
	}
	t.Parallel()
	proxyRestartsUnderLoad(t, 200, "--envoy-path", envoy)
}

// BenchmarkProxyRestart measures, under 500 requests a second through the frontend's
// sidecar, the time from `meshlab proxy restart` to the new epoch LIVE (median over the
// restarts of all runs) and the requests that failed per run of 10 restarts (median).
// Run: sudo go test ./e2e -run '^$' -bench ProxyRestart -benchtime 3x
func BenchmarkProxyRestart(b *testing.B) {
	testutil.RequireRoot(b)
	var took []time.Duration
	var failed []int64
	for i := 0; i < b.N; i++ {
		tk, f := proxyRestartsUnderLoad(b, 500)
		took = append(took, tk...)
		failed = append(failed, f)
	}
	slices.Sort(took)
	slices.Sort(failed)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-restart-to-live-ms")
	b.ReportMetric(float64(failed[len(failed)/2]), "median-failed-requests")
}

// findEnvoy finds an Envoy binary the way the agent does.
func findEnvoy() (string, bool) {
	if p := os.Getenv(agent.EnvoyEnv); p != "" {
		return p, true
	}
	if p, err := exec.LookPath("envoy"); err == nil {
		return p, true
	}
	home, _ := os.UserHomeDir()
	for _, dir := range agent.FuncEVersionsDirs(os.Getenv, home) {
		matches, _ := filepath.Glob(filepath.Join(dir, "*", "bin", "envoy"))
		if len(matches) > 0 {
			slices.Sort(matches)
			return matches[len(matches)-1], true
		}
	}
	return "", false
}

// proxyRestartsUnderLoad runs one lab, sends rate requests a second through the
// frontend's sidecar while starting 10 new epochs, checks the outcome and returns the
// restart-to-live times and the number of failed requests.
func proxyRestartsUnderLoad(tb testing.TB, rate int, upArgs ...string) ([]time.Duration, int64) {
	tb.Helper()
	l := startLab(tb, upArgs...)
	paths := lab.PathsFor(lab.DefaultRunRoot, l.name)
	lc := api.NewUnixClient(paths.APISocket())
	tb.Cleanup(lc.Close)
	const pod = "frontend-v1"

	// Short drain and parent shutdown times, so that parents exit within the test; this
	// settings change is itself the first new epoch.
	ac := agentapi.NewClient(paths.AgentSocket(pod))
	tb.Cleanup(ac.Close)
	res, err := ac.SetProxyConfig(context.Background(), agentapi.ProxySettings{LogLevel: "info", Concurrency: 2,
		DrainDuration: agentapi.Duration(time.Second), ParentShutdownDuration: agentapi.Duration(2 * time.Second)})
	if err != nil || !res.Restarted {
		tb.Fatalf("PUT /proxy-config = %+v, %v", res, err)
	}

	backend := podIP(tb, lc, "backend-v1")
	load := startLoad(tb, l.name, pod, backend, rate)
	exits := map[int]*int{} // pid -> exit code, nil while running
	var order []int         // pids in epoch order
	observe := func() api.AgentStatus {
		tb.Helper()
		d, err := lc.PodDetail(context.Background(), pod)
		if err != nil || d.Proxy == nil {
			tb.Fatalf("describe %s: %+v %v", pod, d, err)
		}
		for _, e := range d.Proxy.Epochs {
			if _, seen := exits[e.PID]; !seen {
				order = append(order, e.PID)
			}
			exits[e.PID] = e.ExitCode
		}
		return *d.Proxy
	}
	waitEpochLive(tb, lc, pod, 1)
	observe()
	var took []time.Duration
	for i := 2; i <= restartsUnderLoad; i++ {
		r, err := lc.RestartProxy(context.Background(), pod, true)
		if err != nil || !r.Live || r.Epoch != i {
			st := observe()
			tb.Fatalf("restart %d: %+v %v\nagent: %s", i, r, err, st.Message)
		}
		took = append(took, r.Elapsed)
		observe()
	}
	okN, failed, errs := load.stop()
	tb.Logf("%d requests succeeded, %d failed during %d restarts; restart to live took %v", okN, failed, restartsUnderLoad, took)
	if failed > 0 {
		tb.Errorf("%d of %d requests failed during the restarts, e.g. %q", failed, okN+failed, errs)
	}
	if okN < 100 {
		tb.Errorf("only %d requests succeeded: the load did not run", okN)
	}
	// Every parent exits within its parent shutdown time after the last restart.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := observe()
		running := 0
		for _, e := range st.Epochs {
			if e.State != "exited" {
				running++
			}
		}
		if running == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(order) != restartsUnderLoad+1 {
		tb.Errorf("saw %d proxy processes, want %d (epochs 0..%d, no retries)", len(order), restartsUnderLoad+1, restartsUnderLoad)
	}
	for i, pid := range order {
		code := exits[pid]
		last := i == len(order)-1
		switch {
		case last && code != nil:
			tb.Errorf("the last epoch (pid %d) exited with %d; want it running", pid, *code)
		case !last && code == nil:
			tb.Errorf("epoch %d (pid %d) is still running; want it exited", i, pid)
		case !last && *code != 0:
			tb.Errorf("epoch %d (pid %d) exited with %d; want 0", i, pid, *code)
		}
	}
	return took, failed
}

// waitEpochLive waits until pod's proxy epoch is live; it fails at once when that epoch
// exits instead.
func waitEpochLive(tb testing.TB, lc *api.Client, pod string, epoch int) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := lc.PodDetail(context.Background(), pod)
		if err == nil && d.Proxy != nil {
			for _, e := range d.Proxy.Epochs {
				if e.Epoch == epoch && e.State == "live" {
					return
				}
				if e.Epoch == epoch && e.State == "exited" {
					tb.Fatalf("epoch %d of %s exited before it was live: %s\nagent: %s", epoch, pod, e.Error, d.Proxy.Message)
				}
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("epoch %d of %s not live: %+v %v", epoch, pod, d.Proxy, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func podIP(tb testing.TB, lc *api.Client, pod string) string {
	tb.Helper()
	pods, err := lc.Pods(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range pods {
		if p.Name == pod {
			return p.IP.String()
		}
	}
	tb.Fatalf("no pod %s in %+v", pod, pods)
	return ""
}

// loadGen sends a steady rate of requests from inside a pod (each on a new connection,
// captured by the pod's sidecar) to the backend Service's port on addr.
type loadGen struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	errs   []string
}

func startLoad(tb testing.TB, labName, pod, addr string, rate int) *loadGen {
	tb.Helper()
	ns := lab.NamespaceName(labName, pod)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			return netns.DialContext(ctx, ns, network, a)
		},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	g := &loadGen{cancel: cancel}
	send := func() {
		defer g.wg.Done()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+net.JoinHostPort(addr, "8080")+"/", nil)
		req.Host = "backend:8080" // routed by the sidecar's outbound listener for port 8080
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		if err != nil {
			g.failed.Add(1)
			g.mu.Lock()
			if len(g.errs) < 5 {
				g.errs = append(g.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			g.mu.Unlock()
			return
		}
		g.ok.Add(1)
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				g.wg.Add(1)
				go send()
			}
		}
	}()
	tb.Cleanup(func() { g.stop() })
	// The load must work before the restarts start.
	deadline := time.Now().Add(10 * time.Second)
	for g.ok.Load() < 20 {
		if time.Now().After(deadline) {
			_, failed, errs := g.stop()
			tb.Fatalf("load does not get through before any restart: %d failed, e.g. %q", failed, errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g
}

// stop ends the load, waits for requests in flight and returns the counts.
func (g *loadGen) stop() (ok, failed int64, errs []string) {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ok.Load(), g.failed.Load(), slices.Clone(g.errs)
}

// TestDescribePodAndRestartErrors drives `meshlab describe pod` and the error paths of
// `meshlab proxy restart` (which work whatever the data plane's hot restart does).
func TestDescribePodAndRestartErrors(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	out, err := meshlab(t, "describe", "pod", "--name", l.name, "frontend-v1")
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{"Name:               frontend-v1", "Sidecar:            running", "Data plane:",
		"\n  0      ", " live ", " initial "} {
		if !strings.Contains(out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, out)
		}
	}
	if out, err := meshlab(t, "describe", "pod", "--name", l.name, "nope"); err == nil || !strings.Contains(out, "unknown pod") {
		t.Errorf("describe of an unknown pod: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "proxy", "restart", "--name", l.name, "nope"); err == nil || !strings.Contains(out, "unknown pod") {
		t.Errorf("restart of an unknown pod: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "proxy", "restart", "--name", l.name); err == nil || !strings.Contains(out, "accepts 1 arg") {
		t.Errorf("restart without a pod: %v\n%s", err, out)
	}
}
