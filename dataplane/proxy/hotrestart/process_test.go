package hotrestart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"

	"github.com/meshlab/meshlab/dataplane/proxy"
	"github.com/meshlab/meshlab/dataplane/proxy/hotrestart"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"

	"github.com/meshlab/meshlab/dataplane/statstext"
)

// helperEnv makes the test binary run `meshlab proxy` with its arguments (the
// helper-process pattern), so the tests run real processes without building meshlab.
const helperEnv = "MESHLAB_HOTRESTART_TEST_PROXY"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := proxy.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// lab is one test's proxies, backend and clients. As root they all live in a throwaway
// network namespace, as a pod's do, so the proxies use Envoy's default base id 0 and
// fixed ports; otherwise they share the test's namespace and get a base id and a port of
// their own (abstract socket names are per network namespace).
type lab struct {
	t       *testing.T
	dir     string
	ns      string // "" without root
	baseID  uint32
	port    int
	backend string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{t: t, dir: t.TempDir()}
	if os.Geteuid() == 0 {
		l.ns = "ml-" + testutil.UniqueName(t) + "-hr"
		if err := netns.Create(l.ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(l.ns); err != nil {
				t.Errorf("delete netns: %v", err)
			}
		})
		if err := netns.Do(l.ns, func() error {
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			return netlink.LinkSetUp(lo)
		}); err != nil {
			t.Fatalf("set lo up: %v", err)
		}
		l.port = 8080
	} else {
		h := fnv.New32a()
		h.Write([]byte(t.Name()))
		l.baseID = 200000000 + (uint32(os.Getpid())%20000)*20000 + h.Sum32()%20000
		l.port = freePort(t)
	}
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	var ln net.Listener
	if err := l.in(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	be.Listener = ln
	be.Start()
	t.Cleanup(be.Close)
	l.backend = ln.Addr().String()
	return l
}

// listenIP is where the proxies listen: 0.0.0.0 as a sidecar's listeners do when the
// lab has a namespace of its own, else loopback only.
func (l *lab) listenIP() string {
	if l.ns != "" {
		return "0.0.0.0"
	}
	return "127.0.0.1"
}

// in runs fn in the lab's namespace.
func (l *lab) in(fn func() error) error {
	if l.ns == "" {
		return fn()
	}
	return netns.Do(l.ns, fn)
}

// transport returns an HTTP transport whose connections live in the lab's namespace.
func (l *lab) transport() *http.Transport {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	if l.ns != "" {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.DialContext(ctx, l.ns, network, addr)
		}
	}
	return tr
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// bootstrap is a static listener on the lab's port routing everything to a STATIC
// cluster of the backend; with neverLive it also asks for CDS over ADS from a control
// plane that does not exist, so the proxy stays PRE_INITIALIZING.
func (l *lab) bootstrap(neverLive bool) string {
	host, port, _ := net.SplitHostPort(l.backend)
	clusters := fmt.Sprintf(`[{"name":"backend","type":"STATIC","connect_timeout":"1s","load_assignment":{"cluster_name":"backend","endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":%q,"port_value":%s}}}}]}]}}`, host, port)
	dynamic := ""
	if neverLive {
		clusters += fmt.Sprintf(`,{"name":"xds-grpc","type":"STATIC","connect_timeout":"1s","load_assignment":{"cluster_name":"xds-grpc","endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"pipe":{"path":%q}}}}]}]}}`, filepath.Join(l.dir, "no-such-xds.sock"))
		dynamic = `,"dynamic_resources":{"cds_config":{"ads":{},"resource_api_version":"V3"},"ads_config":{"api_type":"GRPC","transport_api_version":"V3","grpc_services":[{"envoy_grpc":{"cluster_name":"xds-grpc"}}]}}`
	}
	return fmt.Sprintf(`{"node":{"id":"hot","cluster":"hot"},
"admin":{"address":{"socket_address":{"address":"127.0.0.1","port_value":0}}},
"static_resources":{"clusters":%s],"listeners":[{"name":"web","address":{"socket_address":{"address":%q,"port_value":%d}},
"filter_chains":[{"filters":[{"name":"envoy.filters.network.http_connection_manager","typed_config":{
"@type":"type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
"stat_prefix":"web","route_config":{"name":"local","virtual_hosts":[{"name":"all","domains":["*"],"routes":[{"match":{"prefix":"/"},"route":{"cluster":"backend"}}]}]},
"http_filters":[{"name":"envoy.filters.http.router","typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}]}%s}`,
		clusters, l.listenIP(), l.port, dynamic)
}

// epoch is one running proxy process.
type epoch struct {
	l        *lab
	n        uint32
	cmd      *exec.Cmd
	done     chan struct{}
	err      error
	log      *bytes.Buffer
	adminTxt string
}

func (l *lab) start(n uint32, neverLive bool) *epoch {
	l.t.Helper()
	adminPath := filepath.Join(l.dir, fmt.Sprintf("admin-%d-%d", n, time.Now().UnixNano()))
	cmd := exec.Command(os.Args[0], "--config-yaml", l.bootstrap(neverLive),
		"--restart-epoch", strconv.Itoa(int(n)), "--base-id", strconv.FormatUint(uint64(l.baseID), 10),
		"--drain-time-s", "1", "--parent-shutdown-time-s", "2", "--admin-address-path", adminPath, "-l", "info")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	e := &epoch{l: l, n: n, cmd: cmd, done: make(chan struct{}), log: &bytes.Buffer{}, adminTxt: adminPath}
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return e.log.Write(p)
	})
	if err := l.in(cmd.Start); err != nil {
		l.t.Fatalf("start epoch %d: %v", n, err)
	}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	l.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-e.done
		if l.t.Failed() {
			mu.Lock()
			l.t.Logf("epoch %d log:\n%s", n, e.log.String())
			mu.Unlock()
		}
	})
	return e
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// admin returns the epoch's admin address once it is bound.
func (e *epoch) admin(t *testing.T) string {
	t.Helper()
	var addr string
	waitFor(t, fmt.Sprintf("epoch %d admin address", e.n), func() bool {
		b, err := os.ReadFile(e.adminTxt)
		addr = string(b)
		return err == nil && addr != ""
	}, e)
	return addr
}

func waitFor(t *testing.T, what string, cond func() bool, e *epoch) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case <-e.done:
			t.Fatalf("waiting for %s: epoch %d exited: %v", what, e.n, e.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *lab) get(addr, path string) (string, error) {
	tr := l.transport()
	tr.DisableKeepAlives = true
	c := &http.Client{Timeout: 2 * time.Second, Transport: tr}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

type serverInfo struct {
	State              string `json:"state"`
	HotRestartVersion  string `json:"hot_restart_version"`
	UptimeAllEpochs    string `json:"uptime_all_epochs"`
	UptimeCurrentEpoch string `json:"uptime_current_epoch"`
	CommandLineOptions struct {
		RestartEpoch uint32 `json:"restart_epoch"`
	} `json:"command_line_options"`
}

func (e *epoch) info(t *testing.T) (serverInfo, error) {
	t.Helper()
	var si serverInfo
	body, err := e.l.get(e.admin(t), "/server_info")
	if err != nil {
		return si, err
	}
	return si, json.Unmarshal([]byte(body), &si)
}

func (e *epoch) waitLive(t *testing.T) {
	t.Helper()
	waitFor(t, fmt.Sprintf("epoch %d LIVE", e.n), func() bool {
		si, err := e.info(t)
		return err == nil && si.State == "LIVE"
	}, e)
}

func (e *epoch) stat(t *testing.T, name string) int64 {
	t.Helper()
	body, err := e.l.get(e.admin(t), "/stats?filter=^"+strings.ReplaceAll(name, ".", "\\.")+"$")
	if err != nil {
		t.Fatalf("stats of epoch %d: %v", e.n, err)
	}
	vals, err := statstext.ParseValues(strings.NewReader(body))
	if err != nil {
		t.Fatalf("stats of epoch %d: %v", e.n, err)
	}
	return int64(vals[name])
}

// waitExit waits for an epoch to exit by itself and checks it exited 0.
func (e *epoch) waitExit(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-e.done:
		if e.err != nil {
			t.Errorf("epoch %d exited with %v, want 0", e.n, e.err)
		}
	case <-time.After(within):
		t.Fatalf("epoch %d did not exit within %s", e.n, within)
	}
}

// load sends requests over keep-alive connections from a few goroutines until stopped.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func (l *lab) startLoad(t *testing.T, addr string, workers int) *load {
	t.Helper()
	ld := &load{stop: make(chan struct{})}
	for range workers {
		tr := l.transport()
		c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			defer tr.CloseIdleConnections()
			for {
				select {
				case <-ld.stop:
					return
				default:
				}
				resp, err := c.Get("http://" + addr + "/")
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					ld.failed.Add(1)
					ld.mu.Lock()
					if len(ld.errs) < 5 {
						ld.errs = append(ld.errs, err.Error())
					}
					ld.mu.Unlock()
					continue
				}
				ld.ok.Add(1)
			}
		}()
	}
	t.Cleanup(ld.halt)
	return ld
}

func (ld *load) halt() {
	select {
	case <-ld.stop:
	default:
		close(ld.stop)
	}
	ld.wg.Wait()
}

func (ld *load) check(t *testing.T) {
	t.Helper()
	if n := ld.failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during hot restarts; first errors: %v", n, n+ld.ok.Load(), ld.errs)
	}
}

// waitServed waits until the load has had n more successful requests.
func (ld *load) waitServed(t *testing.T, n int64) {
	t.Helper()
	target := ld.ok.Load() + n
	deadline := time.Now().Add(30 * time.Second)
	for ld.ok.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("load stalled at %d requests (%d failed: %v)", ld.ok.Load(), ld.failed.Load(), ld.errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHotRestartUnderLoadLosesNoRequest(t *testing.T) {
	t.Parallel()
	const restarts = 10
	l := newLab(t)
	cur := l.start(0, false)
	cur.waitLive(t)
	addr := fmt.Sprintf("127.0.0.1:%d", l.port)
	ld := l.startLoad(t, addr, 4)
	ld.waitServed(t, 50)
	first := time.Now()
	var toLive time.Duration
	for n := uint32(1); n <= restarts; n++ {
		began := time.Now()
		next := l.start(n, false)
		next.waitLive(t)
		toLive += time.Since(began)
		ld.waitServed(t, 20)
		// The parent exits 0 by itself, --parent-shutdown-time-s after the child started.
		cur.waitExit(t, 30*time.Second)
		ld.waitServed(t, 20)
		cur = next
	}
	ld.halt()
	ld.check(t)
	sent := ld.ok.Load()

	si, err := cur.info(t)
	if err != nil {
		t.Fatal(err)
	}
	if si.CommandLineOptions.RestartEpoch != restarts || si.HotRestartVersion != hotrestart.Version || si.State != "LIVE" {
		t.Errorf("last epoch server_info = %+v", si)
	}
	all, err1 := time.ParseDuration(si.UptimeAllEpochs)
	one, err2 := time.ParseDuration(si.UptimeCurrentEpoch)
	if err1 != nil || err2 != nil || all < time.Since(first)-time.Second || all <= one {
		t.Errorf("uptime_all_epochs %s, uptime_current_epoch %s: want all epochs since the first (>= %s)", si.UptimeAllEpochs, si.UptimeCurrentEpoch, time.Since(first).Truncate(time.Second))
	}
	if v, err := cur.l.get(cur.admin(t), "/hot_restart_version"); err != nil || v != hotrestart.Version {
		t.Errorf("/hot_restart_version = %q, %v", v, err)
	}
	for name, want := range map[string]int64{"server.hot_restart_epoch": restarts, "server.hot_restart_generation": restarts + 1} {
		if got := cur.stat(t, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	// Counters continue across epochs: the last epoch counts every request ever served.
	if got := cur.stat(t, "http.web.downstream_rq_2xx"); got < sent {
		t.Errorf("http.web.downstream_rq_2xx = %d in the last epoch, want >= %d requests sent", got, sent)
	}
	if got := cur.stat(t, "cluster.backend.upstream_rq_total"); got < sent {
		t.Errorf("cluster.backend.upstream_rq_total = %d, want >= %d", got, sent)
	}
	t.Logf("%d requests over %d hot restarts, none failed; mean start-to-LIVE %s (in a netns: %v)",
		sent, restarts, (toLive / restarts).Round(time.Millisecond), l.ns != "")
}

func TestCrashOfNewEpochBeforeLiveLeavesOldServing(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	old := l.start(0, false)
	old.waitLive(t)
	ld := l.startLoad(t, fmt.Sprintf("127.0.0.1:%d", l.port), 3)
	ld.waitServed(t, 50)

	doomed := l.start(1, true)
	doomed.admin(t) // bound: it holds the listen socket too, but is not LIVE
	si, err := doomed.info(t)
	if err != nil || si.State != "PRE_INITIALIZING" {
		t.Fatalf("new epoch state = %q, %v; the test needs it not LIVE", si.State, err)
	}
	ld.waitServed(t, 50)
	if err := doomed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-doomed.done
	ld.waitServed(t, 100)
	select {
	case <-old.done:
		t.Fatalf("the old epoch exited after its child crashed: %v", old.err)
	default:
	}
	// The agent retries the same epoch: this one takes over and the old one exits 0.
	retry := l.start(1, false)
	retry.waitLive(t)
	old.waitExit(t, 30*time.Second)
	ld.waitServed(t, 50)
	ld.halt()
	ld.check(t)
}

func TestHotRestartVersionFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "prints the version to stderr", args: []string{"--hot-restart-version"}, want: hotrestart.Version + "\n"},
		{name: "disabled with --disable-hot-restart", args: []string{"--hot-restart-version", "--disable-hot-restart"}, want: "disabled\n"},
	} {
		var out, errOut bytes.Buffer
		if code := proxy.Main(context.Background(), tc.args, &out, &errOut); code != 0 || errOut.String() != tc.want {
			t.Errorf("%s: exit %d, stderr %q, want 0 and %q", tc.name, code, errOut.String(), tc.want)
		}
	}
}

func TestSecondProcessWithSameEpochFailsToStart(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	first := l.start(0, false)
	first.waitLive(t)
	dup := l.start(3, false) // 3 % 3 == 0: the same socket names
	select {
	case <-dup.done:
		var ee *exec.ExitError
		if !errors.As(dup.err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("exit = %v, want status 1", dup.err)
		}
		if !strings.Contains(dup.log.String(), "unable to bind domain socket") {
			t.Errorf("log lacks the reason:\n%s", dup.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a fourth concurrent epoch kept running")
	}
}

// TestChildStartTerminatesGrandparent pins Envoy's rule that keeps at most three
// processes: when epoch 2 starts while epoch 0 is still draining, epoch 1 terminates
// epoch 0 at once (on ShutdownAdmin), and the load sees no failure.
func TestChildStartTerminatesGrandparent(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	e0 := l.start(0, false)
	e0.waitLive(t)
	ld := l.startLoad(t, fmt.Sprintf("127.0.0.1:%d", l.port), 3)
	ld.waitServed(t, 50)
	e1 := l.start(1, false)
	e1.waitLive(t)
	select {
	case <-e0.done:
		t.Fatal("epoch 0 exited before its parent-shutdown time; the test needs it draining")
	default:
	}
	e2 := l.start(2, false)
	e2.waitLive(t)
	e0.waitExit(t, 5*time.Second)
	select {
	case <-e1.done:
		t.Error("epoch 1 exited before epoch 0; it should drain until epoch 2's parent-shutdown time")
	default:
	}
	e1.waitExit(t, 30*time.Second)
	ld.waitServed(t, 50)
	ld.halt()
	ld.check(t)
	if got := e2.stat(t, "server.hot_restart_generation"); got != 3 {
		t.Errorf("server.hot_restart_generation = %d, want 3", got)
	}
}
