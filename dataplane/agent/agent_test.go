package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/internal/testutil"
)

// freePort returns a loopback port that is free for TCP and UDP at the time of the call.
// It is drawn below the kernel's ephemeral range (32768 and up), which the kernel hands to
// other tests' outgoing connections and :0 listeners: a port from there was taken again
// while the agent restarted its proxy on it (CI, "bind: address already in use").
func freePort(t *testing.T) uint16 {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		pc.Close()
		return uint16(port)
	}
	t.Fatal("no free port")
	return 0
}

// sharedDir makes a 0755 temporary directory that uid 1337 can read, removed at cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ml-"+testutil.UniqueName(t)+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeLab serves the name-table long-poll on a unix socket, as the lab API does.
type fakeLab struct {
	mu      sync.Mutex
	table   agentapi.NameTable
	changed chan struct{}
	fail    int // answer this many requests with 500 first
	queries []string
	hold    time.Duration // how long a current version is held; 0: 30 s, -1: not at all
}

func newFakeLab(t *testing.T, socket string, table agentapi.NameTable) *fakeLab {
	t.Helper()
	l := &fakeLab{table: table, changed: make(chan struct{})}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(l.serve))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return l
}

func (l *fakeLab) serve(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.queries = append(l.queries, r.URL.String())
	if l.fail > 0 {
		l.fail--
		l.mu.Unlock()
		http.Error(w, "lab not ready", http.StatusInternalServerError)
		return
	}
	if r.URL.Path != "/v1/agents/backend-v1.default/nametable" { // the pod as istioctl names it
		l.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	changed := l.changed
	same := r.URL.Query().Get("version") == jsonUint(l.table.Version)
	hold := l.hold
	l.mu.Unlock()
	if hold == 0 {
		hold = 30 * time.Second
	}
	if same && hold > 0 {
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-time.After(hold):
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = json.NewEncoder(w).Encode(l.table)
}

func (l *fakeLab) set(t agentapi.NameTable) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.table = t
	close(l.changed)
	l.changed = make(chan struct{})
}

func jsonUint(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// unixClient is an HTTP client for agent.sock.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// eventually polls f every 20ms until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getStatus(c *http.Client) (agentapi.Status, error) {
	var s agentapi.Status
	resp, err := c.Get("http://agent/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// agentRun is one running agent in a test with the fake proxy.
type agentRun struct {
	cfg    Config
	events string
	launch *helperLauncher
	done   chan error
	cancel context.CancelFunc
	sock   *http.Client
	lab    *fakeLab
}

func startAgent(t *testing.T, mode string) *agentRun {
	t.Helper()
	return startAgentWith(t, mode, nil)
}

func startAgentWith(t *testing.T, mode string, mutate func(*Config)) *agentRun {
	t.Helper()
	return startAgentTuned(t, mode, mutate, nil)
}

// startAgentTuned is startAgentWith with the epoch manager's timings changed by tune
// (optional).
func startAgentTuned(t *testing.T, mode string, mutate func(*Config), tune func(*epochManager)) *agentRun {
	t.Helper()
	testutil.RequireRoot(t) // the fake proxy runs as uid 1337
	dir := sharedDir(t)
	events := filepath.Join(dir, "events")
	if err := os.WriteFile(events, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(events, 0o666); err != nil {
		t.Fatal(err)
	}
	c := Config{
		Lab: "t", Pod: "backend-v1", Namespace: "default", PodIP: netip.MustParseAddr("10.244.0.3"),
		NodeID:         "sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local",
		ServiceCluster: "backend.default", Workload: "backend-v1", Labels: map[string]string{"app": "backend"},
		ServiceAccount: "backend", RunDir: dir, XDSSocket: filepath.Join(dir, "xds.sock"),
		LabSocket: filepath.Join(dir, "api.sock"), ProxyPath: "/opt/test/envoy",
		BaseID: 7, LogLevel: "debug", Concurrency: 1,
		DrainDuration: 3 * time.Second, ParentShutdownDuration: 4 * time.Second,
		TerminationDrainDuration: 50 * time.Millisecond,
		AdminPort:                freePort(t), StatusPort: freePort(t), DNSPort: freePort(t),
	}
	if mutate != nil {
		mutate(&c)
	}
	lab := newFakeLab(t, c.LabSocket, agentapi.NameTable{Version: 1, Names: map[string][]netip.Addr{
		"backend.default.svc.cluster.local": {netip.MustParseAddr("10.96.0.10")},
	}})
	env := []string{helperEventsEnv + "=" + events}
	if mode != "" {
		env = append(env, helperModeEnv+"="+mode)
	}
	r := &agentRun{cfg: c, events: events, launch: &helperLauncher{env: env}, done: make(chan error, 1),
		sock: unixClient(SocketPath(dir)), lab: lab}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		r.done <- run(ctx, c, testutil.Logger(t), deps{launch: r.launch, lookup: osLookup, listenHost: "127.0.0.1", tune: tune})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Error("agent did not stop")
		}
	})
	return r
}

func (r *agentRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not stop")
	}
}

func (r *agentRun) eventLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(r.events)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestRunStartsReadyProxyAndStopsIt(t *testing.T) {
	r := startAgent(t, "")
	c := r.cfg

	eventually(t, "pod ready on the status port", func() error {
		resp, err := http.Get("http://127.0.0.1:" + jsonUint(uint64(c.StatusPort)) + "/healthz/ready")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status + ": " + string(body))
		}
		return nil
	})

	// The proxy's command line and process attributes.
	cmds := r.launch.launched()
	if len(cmds) != 2 {
		t.Fatalf("launched %d commands, want 2 (--version, epoch 0): %+v", len(cmds), cmds)
	}
	if want := []string{"/opt/test/envoy", "--version"}; !slices.Equal(cmds[0].Args, want) {
		t.Errorf("version argv = %q, want %q", cmds[0].Args, want)
	}
	wantArgv := []string{
		"/opt/test/envoy",
		"-c", filepath.Join(c.RunDir, "envoy-rev0.json"),
		"--restart-epoch", "0",
		"--base-id", "7",
		"--drain-time-s", "3",
		"--parent-shutdown-time-s", "4",
		"--service-cluster", "backend.default",
		"--service-node", "sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local",
		"--local-address-ip-version", "v4",
		"--log-level", "debug",
		"--concurrency", "1",
		"--drain-strategy", "immediate",
		"--allow-unknown-static-fields",
	}
	if !slices.Equal(cmds[1].Args, wantArgv) {
		t.Errorf("proxy argv =\n%q\nwant\n%q", cmds[1].Args, wantArgv)
	}
	attr := cmds[1].Attr
	if attr == nil || attr.Credential == nil || attr.Credential.Uid != 1337 || attr.Credential.Gid != 1337 ||
		attr.Pdeathsig != syscall.SIGKILL || !attr.Setpgid {
		t.Errorf("proxy SysProcAttr = %+v, want uid/gid 1337, Pdeathsig SIGKILL, Setpgid", attr)
	}
	if ev := r.eventLines(t); len(ev) == 0 || !strings.HasPrefix(ev[0], "start uid=1337 gid=1337 pgid-is-pid=true ") {
		t.Errorf("fake proxy events = %q, want it started as 1337:1337 in its own process group", ev)
	}

	// agent.sock: mode, status and the admin reverse proxy.
	sockPath := SocketPath(c.RunDir)
	if fi, err := os.Stat(sockPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("agent.sock stat = %v, %v; want mode 0600", fi, err)
	}
	st, err := getStatus(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.Pod != "backend-v1" || st.ProxyVersion != fakeVersion || st.DataPlane != agentapi.DataPlaneEnvoy ||
		st.ProxyPath != "/opt/test/envoy" || st.Restarts != 0 || st.Message != "" {
		t.Errorf("status = %+v", st)
	}
	if len(st.Epochs) != 1 || st.Epochs[0].Epoch != 0 || st.Epochs[0].PID <= 0 || st.Epochs[0].State != agentapi.EpochLive {
		t.Errorf("epochs = %+v, want epoch 0 live with a pid", st.Epochs)
	}
	resp, err := r.sock.Get("http://agent/admin/stats?filter=" + "%5Ecluster_manager")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "filter: ^cluster_manager\n") {
		t.Errorf("GET /admin/stats via agent.sock = %d %q", resp.StatusCode, body)
	}

	// DNS from the lab's name table.
	eventually(t, "dns answers from the name table", func() error {
		m := new(dns.Msg)
		m.SetQuestion("backend.default.svc.cluster.local.", dns.TypeA)
		in, err := dns.Exchange(m, "127.0.0.1:"+jsonUint(uint64(c.DNSPort)))
		if err != nil {
			return err
		}
		if len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "10.96.0.10" {
			return errors.New(in.String())
		}
		return nil
	})

	r.stop(t)
	ev := r.eventLines(t)
	if len(ev) != 3 || ev[1] != "drain_listeners inboundonly&graceful" || ev[2] != "epoch 0: signal terminated" {
		t.Errorf("fake proxy events = %q, want start, drain_listeners inboundonly&graceful, then SIGTERM", ev)
	}
	for _, gone := range []string{sockPath, filepath.Join(c.RunDir, "envoy-rev0.json")} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after shutdown: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.RunDir, "proxy.log")); err != nil {
		t.Errorf("proxy.log: %v", err)
	}
}

func TestRunRestartsCrashedProxy(t *testing.T) {
	r := startAgent(t, "crash-first")
	var st agentapi.Status
	eventually(t, "proxy restarted and ready", func() error {
		var err error
		st, err = getStatus(r.sock)
		if err != nil {
			return err
		}
		if !st.Ready || st.Restarts != 1 {
			return errors.New("not yet: " + st.Message)
		}
		return nil
	})
	if len(st.Epochs) != 2 {
		t.Fatalf("epochs = %+v, want the crashed one and the live one", st.Epochs)
	}
	crashed, live := st.Epochs[0], st.Epochs[1]
	if crashed.State != agentapi.EpochExited || crashed.ExitCode == nil || *crashed.ExitCode != 3 || crashed.ExitedAt == nil ||
		!strings.Contains(crashed.Error, "exit status 3") {
		t.Errorf("crashed epoch = %+v", crashed)
	}
	if live.Epoch != 0 || live.State != agentapi.EpochLive || live.PID == crashed.PID {
		t.Errorf("restarted epoch = %+v", live)
	}
	// The last 20 stderr lines of the crash, and not the first 5.
	if !strings.Contains(st.Message, "fake crash line 24") || !strings.Contains(st.Message, "fake crash line 5\n") ||
		strings.Contains(st.Message, "fake crash line 4\n") {
		t.Errorf("message = %q, want the last 20 stderr lines", st.Message)
	}
	r.stop(t)
}

// proxyArgv returns the argv of every proxy epoch the agent launched (not --version).
func (r *agentRun) proxyArgv() [][]string {
	var out [][]string
	for _, c := range r.launch.launched() {
		if !slices.Contains(c.Args, "--version") {
			out = append(out, c.Args)
		}
	}
	return out
}

func argValue(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

func (r *agentRun) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://agent"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.sock.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitStatus(t *testing.T, r *agentRun, what string, ok func(agentapi.Status) bool) agentapi.Status {
	t.Helper()
	var st agentapi.Status
	eventually(t, what, func() error {
		var err error
		if st, err = getStatus(r.sock); err != nil {
			return err
		}
		if !ok(st) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	return st
}

// The epoch machinery end to end with the fake proxy as uid 1337: POST /restart starts
// epoch 1 with --restart-epoch 1 and the pod's --base-id once epoch 0 is live; the parent
// hands over and exits cleanly; an unchanged PUT /proxy-config is a no-op and a changed
// one starts epoch 2 with the new flags.
func TestRunRestartsAndReconfiguresTheProxy(t *testing.T) {
	r := startAgent(t, "")
	waitStatus(t, r, "epoch 0 ready", func(s agentapi.Status) bool { return s.Ready })

	code, body := r.do(t, http.MethodPost, "/restart", "")
	if code != http.StatusOK || !strings.Contains(body, `"epoch": 1`) || !strings.Contains(body, `"restarted": true`) {
		t.Fatalf("POST /restart = %d %s", code, body)
	}
	st := waitStatus(t, r, "epoch 1 live, epoch 0 exited cleanly", func(s agentapi.Status) bool {
		return s.Ready && len(s.Epochs) == 2 && s.Epochs[1].State == agentapi.EpochLive && s.Epochs[0].State == agentapi.EpochExited
	})
	if e := st.Epochs[0]; *e.ExitCode != 0 || e.Error != "" {
		t.Errorf("parent epoch = %+v, want a clean exit", e)
	}
	if e := st.Epochs[1]; e.Reason != agentapi.ReasonRestart || e.ProxyVersion != fakeVersion || e.PID == st.Epochs[0].PID {
		t.Errorf("child epoch = %+v", e)
	}
	argv := r.proxyArgv()
	if len(argv) != 2 || argValue(argv[1], "--restart-epoch") != "1" || argValue(argv[1], "--base-id") != "7" ||
		argValue(argv[1], "--drain-time-s") != "3" || argValue(argv[1], "--parent-shutdown-time-s") != "4" ||
		argValue(argv[1], "-c") != filepath.Join(r.cfg.RunDir, "envoy-rev1.json") {
		t.Errorf("epoch 1 argv = %q", argv)
	}
	if ev := r.eventLines(t); !slices.Contains(ev, "epoch 0: shutdown_admin") || !slices.Contains(ev, "epoch 0: exit after hot restart") {
		t.Errorf("events %q, want the parent to hand over and exit", ev)
	}

	code, body = r.do(t, http.MethodGet, "/proxy-config", "")
	if code != http.StatusOK || !strings.Contains(body, `"logLevel": "debug"`) || !strings.Contains(body, `"drainDuration": "3s"`) {
		t.Errorf("GET /proxy-config = %d %s", code, body)
	}
	code, body = r.do(t, http.MethodPut, "/proxy-config", body)
	if code != http.StatusOK || !strings.Contains(body, `"restarted": false`) {
		t.Errorf("unchanged PUT /proxy-config = %d %s, want a no-op", code, body)
	}
	code, body = r.do(t, http.MethodPut, "/proxy-config", `{"logLevel": "warning", "concurrency": 1, "drainDuration": "2s", "parentShutdownDuration": "4s", "proxyPath": "/opt/test/envoy"}`)
	if code != http.StatusOK || !strings.Contains(body, `"epoch": 2`) {
		t.Fatalf("PUT /proxy-config = %d %s", code, body)
	}
	waitStatus(t, r, "epoch 2 live", func(s agentapi.Status) bool {
		return s.Ready && s.Epochs[len(s.Epochs)-1].Epoch == 2 && s.Epochs[len(s.Epochs)-1].State == agentapi.EpochLive
	})
	argv = r.proxyArgv()
	if len(argv) != 3 || argValue(argv[2], "--restart-epoch") != "2" || argValue(argv[2], "--log-level") != "warning" ||
		argValue(argv[2], "--drain-time-s") != "2" {
		t.Errorf("epoch 2 argv = %q", argv)
	}
	for _, bad := range []string{`{"logLevel": "loud"}`, `{"nope": 1}`, `not json`} {
		if code, body := r.do(t, http.MethodPut, "/proxy-config", bad); code != http.StatusBadRequest {
			t.Errorf("PUT /proxy-config %s = %d %s, want 400", bad, code, body)
		}
	}
	r.stop(t)
}

// A proxy binary that does not exist fails the pod at once with a clear message, and
// the agent keeps serving its status.
// TestRunPushesReadiness asks a starting agent for its status with ?wait=ready: the
// one answer says ready (the lab learns it by this long poll instead of polling), and for
// a pod whose proxy cannot start it says failed.
func TestRunPushesReadiness(t *testing.T) {
	for _, tc := range []struct {
		name      string
		proxyPath string
		check     func(agentapi.Status) bool
	}{
		{name: "ready", check: func(s agentapi.Status) bool {
			return s.Ready && !s.Failed && len(s.Epochs) == 1 && s.Epochs[0].State == agentapi.EpochLive
		}},
		{name: "failed", proxyPath: "/nonexistent/envoy", check: func(s agentapi.Status) bool { return !s.Ready && s.Failed }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startAgentWith(t, "", func(c *Config) {
				if tc.proxyPath != "" {
					c.ProxyPath = tc.proxyPath
				}
			})
			// Each long poll answers when the pod is ready or has failed, or at its timeout
			// (4 s, which a loaded machine's proxy start can outlast): an answer before the
			// timeout must be the awaited one, and one comes within 40 s.
			var st agentapi.Status
			deadline := time.Now().Add(40 * time.Second)
			for {
				var took time.Duration
				eventually(t, "an answer from GET /status?wait=ready", func() error {
					start := time.Now()
					resp, err := r.sock.Get("http://agent/status?wait=ready&timeout=4s") // the client's timeout is 5s
					if err != nil {
						return err // agent.sock not bound yet
					}
					defer resp.Body.Close()
					took = time.Since(start)
					return json.NewDecoder(resp.Body).Decode(&st)
				})
				if tc.check(st) {
					break
				}
				if took < 3*time.Second {
					t.Fatalf("the long poll answered after %v, before its timeout, with %+v", took, st)
				}
				if time.Now().After(deadline) {
					t.Fatalf("status after waiting = %+v", st)
				}
			}
			r.stop(t)
		})
	}
}

func TestRunWithMissingProxyBinaryFailsThePod(t *testing.T) {
	r := startAgentWith(t, "", func(c *Config) { c.ProxyPath = "/nonexistent/envoy" })
	st := waitStatus(t, r, "pod failed", func(s agentapi.Status) bool { return s.Failed })
	if st.Ready || !strings.Contains(st.Message, "proxy cannot be started") || !strings.Contains(st.Message, "/nonexistent/envoy") {
		t.Errorf("status = %+v", st)
	}
	r.stop(t)
}
