package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

// recorder is a system that keeps namespaces and processes as data and records every
// call that changes them, one line each. A namespace created before the lab's journal
// names it is recorded as a fault of its own: Clean could not find it after a crash.
type recorder struct {
	journal string // the lab's journal, checked before each namespace is created

	mu    sync.Mutex
	calls []string
	nss   map[string]bool
	pids  map[string][]int // by namespace
	alive map[int]uint64   // pid -> start
	fail  map[string]error // call name -> its error
	stuck map[int]bool     // processes that live on after any signal but SIGKILL

	nextPID int
	exited  map[int]chan struct{} // a started process's Wait returns once it is closed
	// onStart, when set, runs as a process starts (the test's stand-in for what the
	// process would serve, e.g. an agent's agent.sock); it runs without the lock.
	onStart func(spec processSpec)
	// failIf, when set, fails the calls for which it returns an error.
	failIf func(line string) error
	// agentAsked is what the stand-ins of the agents were asked ("<pod> <path>?<query>"),
	// where a test gives them one (startOnRecorder).
	agentAsked []string
}

// askedAgents returns what the agents were asked since the last call.
func (r *recorder) askedAgents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.agentAsked
	r.agentAsked = nil
	return out
}

var (
	_ namespaces = (*recorder)(nil)
	_ processes  = (*recorder)(nil)
)

func newRecorder() *recorder {
	return &recorder{
		nss: map[string]bool{}, pids: map[string][]int{}, alive: map[int]uint64{}, fail: map[string]error{}, stuck: map[int]bool{},
		nextPID: 1 << 22, exited: map[int]chan struct{}{},
	}
}

// system is a system on r; the proxies' group is the test's own (a test without root
// cannot give a socket group 1337).
func (r *recorder) system() system { return system{ns: r, procs: r, proxyGID: os.Getgid()} }

func (r *recorder) record(call, format string, a ...any) error {
	line := call + " " + fmt.Sprintf(format, a...)
	r.calls = append(r.calls, line)
	if r.failIf != nil {
		if err := r.failIf(line); err != nil {
			return err
		}
	}
	return r.fail[call]
}

// take returns the calls recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// create makes ns exist, after checking the journal names it.
func (r *recorder) create(call, ns, format string, a ...any) error {
	if r.journal != "" {
		es, _ := readJournal(r.journal)
		if !slices.ContainsFunc(es, func(e entry) bool { return e.Kind == "netns" && e.Name == ns }) {
			r.calls = append(r.calls, "NOT IN THE JOURNAL: "+ns)
		}
	}
	if err := r.record(call, format, a...); err != nil {
		return err
	}
	r.nss[ns] = true
	return nil
}

func (r *recorder) List(prefix string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for ns := range r.nss {
		if strings.HasPrefix(ns, prefix) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (r *recorder) Delete(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record("delete-netns", "%s", name); err != nil {
		return err
	}
	delete(r.nss, name)
	return nil
}

func (r *recorder) SetupNode(c netns.NodeConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.create("setup-node", c.Namespace, "%s bridge %s %s", c.Namespace, c.Bridge, c.Gateway)
}

func (r *recorder) SetupPod(c netns.PodConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.create("setup-pod", c.Namespace, "%s %s via %s, veth %s on %s in %s", c.Namespace, c.Address, c.Gateway, c.HostIfName, c.Bridge, c.NodeNamespace); err != nil || !c.AllowLowPorts {
		return err
	}
	return r.record("allow-low-ports", "%s", c.Namespace)
}

func (r *recorder) ApplyRules(name, rules string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	what := fmt.Sprintf("%d lines", strings.Count(rules, "\n"))
	if rules == capture.DefaultConfig().Render() {
		what = "capture.DefaultConfig"
	}
	return r.record("apply-rules", "%s %s", name, what)
}

func (r *recorder) PrepareNode(name string, serviceCIDR netip.Prefix, dev string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.record("prepare-node", "%s %s %s", name, serviceCIDR, dev)
}

func (r *recorder) SetupWorld(c netns.WorldConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.create("setup-world", c.Namespace, "%s link %s in %s %s, %d hosts", c.Namespace, c.NodeIfName, c.NodeNamespace, c.NodeAddress, len(c.Addresses))
}

// Listen records the listener and listens on loopback instead (any port): the namespace
// and its address are the recorder's fiction.
func (r *recorder) Listen(ns, network, address string) (net.Listener, error) {
	r.mu.Lock()
	err := r.record("listen", "%s %s %s", ns, network, address)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return net.Listen("tcp4", "127.0.0.1:0")
}

func (r *recorder) ListenPacket(ns, network, address string) (net.PacketConn, error) {
	r.mu.Lock()
	err := r.record("listen", "%s %s %s", ns, network, address)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return net.ListenPacket("udp4", "127.0.0.1:0")
}

// Start records the process and makes it alive in its namespace until a signal ends it.
func (r *recorder) Start(spec processSpec, _ *os.File) (proc, error) {
	r.mu.Lock()
	as := fmt.Sprintf("uid %d", spec.UID)
	if spec.Sandbox != nil {
		as = fmt.Sprintf("sandboxed as uid %d", spec.Sandbox.UID)
	}
	if len(spec.Env) > 0 {
		as += " with " + strings.Join(spec.Env, " ")
	}
	if err := r.record("start", "%s of %s in %s %s: %s", spec.Role, spec.Pod, spec.NetNS, as, strings.Join(spec.Argv[1:min(2, len(spec.Argv))], " ")); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.nextPID++
	pid := r.nextPID
	r.alive[pid] = 0
	r.pids[spec.NetNS] = append(r.pids[spec.NetNS], pid)
	done := make(chan struct{})
	r.exited[pid] = done
	hook := r.onStart
	r.mu.Unlock()
	if hook != nil {
		hook(spec)
	}
	return recordedProc{r: r, pid: pid, done: done}, nil
}

// recordedProc is a process of the recorder: it runs until signalled.
type recordedProc struct {
	r    *recorder
	pid  int
	done chan struct{}
}

func (p recordedProc) PID() int                        { return p.pid }
func (p recordedProc) Wait() error                     { <-p.done; return errors.New("signal: terminated") }
func (p recordedProc) Signal(sig syscall.Signal) error { return p.r.Signal(p.pid, sig) }

func (r *recorder) PIDsIn(ns string) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pids[ns]), nil
}

func (r *recorder) PIDsInEach(ns []string) (map[string][]int, error) {
	out := map[string][]int{}
	for _, n := range ns {
		pids, _ := r.PIDsIn(n)
		if len(pids) > 0 {
			out[n] = pids
		}
	}
	return out, nil
}

func (r *recorder) Alive(pid int, start uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	got, ok := r.alive[pid]
	return ok && (start == 0 || got == start)
}

func (r *recorder) Signal(pid int, sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record("signal", "%d %s", pid, sig); err != nil {
		return err
	}
	if r.stuck[pid] && sig != syscall.SIGKILL {
		return nil
	}
	delete(r.alive, pid)
	if done, ok := r.exited[pid]; ok {
		close(done)
		delete(r.exited, pid)
	}
	for ns, pids := range r.pids {
		r.pids[ns] = slices.DeleteFunc(pids, func(p int) bool { return p == pid })
	}
	return nil
}

// networkLab is a bare Lab on rec with a run directory and a journal, as Start makes them
// before it creates the network.
func networkLab(t *testing.T, rec *recorder, name string) *Lab {
	t.Helper()
	root := t.TempDir()
	l := &Lab{opts: Options{Name: name, RunRoot: root, PodCIDR: DefaultPodCIDR}, paths: PathsFor(root, name), sys: rec.system()}
	if err := os.MkdirAll(l.paths.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(l.paths.Record(), &Record{Name: name, PID: 1 << 30, PIDStart: 1}); err != nil {
		t.Fatal(err)
	}
	jr, err := openJournal(l.paths.Journal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jr.close() })
	l.jr = jr
	rec.journal = l.paths.Journal()
	return l
}

// createPods runs Start's network steps for pods: the node namespace, then each pod's.
func createPods(l *Lab, pods map[string]bool) error {
	if err := l.createNetwork(); err != nil {
		return err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range pods {
			if !yield(n) {
				return
			}
		}
	})
	for i, n := range names {
		if err := os.MkdirAll(l.paths.PodDir(n), 0o755); err != nil {
			return err
		}
		if err := l.podNetworks().Make(n, netip.AddrFrom4([4]byte{10, 244, 0, byte(2 + i)}), pods[n]); err != nil {
			return err
		}
	}
	return nil
}

func TestStartNetworkJournalsThenCreates(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	l := networkLab(t, rec, "sys1")
	if err := createPods(l, map[string]bool{"app": true, "plain": false}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"setup-node ml-sys1-node bridge mlbr0 10.244.0.1/16",
		"setup-pod ml-sys1-app 10.244.0.2/16 via 10.244.0.1, veth " + netns.HostIfName("sys1", "app") + " on mlbr0 in ml-sys1-node",
		"allow-low-ports ml-sys1-app",
		"apply-rules ml-sys1-app capture.DefaultConfig",
		"setup-pod ml-sys1-plain 10.244.0.3/16 via 10.244.0.1, veth " + netns.HostIfName("sys1", "plain") + " on mlbr0 in ml-sys1-node",
		"allow-low-ports ml-sys1-plain",
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rules, err := os.ReadFile(l.paths.PodDir("app") + "/iptables.rules")
	if err != nil || string(rules) != capture.DefaultConfig().Render() {
		t.Fatalf("the pod's iptables.rules are not the rules applied: %v", err)
	}
	if _, err := os.Stat(l.paths.PodDir("plain") + "/iptables.rules"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a pod without a sidecar got capture rules: %v", err)
	}
}

func TestStartNetworkFailureNamesTheNamespaceAndCleanRemovesIt(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	rec.fail["apply-rules"] = errors.New("iptables-restore: line 3 failed")
	l := networkLab(t, rec, "sys2")
	err := createPods(l, map[string]bool{"app": true})
	testutil.CheckErr(t, "create network", err, "install capture rules in ml-sys2-app: iptables-restore: line 3 failed")
	rec.take()
	if err := clean(rec.system(), l.opts.RunRoot, "sys2", testutil.Logger(t)); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.take(), []string{"delete-netns ml-sys2-node", "delete-netns ml-sys2-app"}; !slices.Equal(got, want) {
		t.Fatalf("clean after a failed start: %q, want %q", got, want)
	}
	if _, err := os.Stat(l.paths.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run directory left: %v", err)
	}
}

func TestCleanKillsThenDeletesWhatIsTheLabs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	rec := newRecorder()
	// Lab "c1" crashed: its process (pid 4000) still runs, one agent (pid 100) is alive,
	// another's pid (101) was reused by a process that started later. Lab "c1-x", whose
	// namespaces share c1's prefix, is another lab and stays.
	p := PathsFor(root, "c1")
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(p.Record(), &Record{Name: "c1", PID: 4000, PIDStart: 7}); err != nil {
		t.Fatal(err)
	}
	jr, err := openJournal(p.Journal())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []entry{
		{Kind: "netns", Name: "ml-c1-node"}, {Kind: "netns", Name: "ml-c1-a"},
		{Kind: "process", PID: 100, Start: 11, Role: "agent", Pod: "a"},
		{Kind: "process", PID: 101, Start: 12, Role: "agent", Pod: "b"},
		{Kind: "netns", Name: "ml-c1-b"}, {Kind: entryNetNSDeleted, Name: "ml-c1-b"},
	} {
		if err := jr.add(e); err != nil {
			t.Fatal(err)
		}
	}
	_ = jr.close()
	writeTestLab(t, root, "c1-x", false, uidp(0))
	ox, err := openJournal(PathsFor(root, "c1-x").Journal())
	if err != nil {
		t.Fatal(err)
	}
	if err := ox.add(entry{Kind: "netns", Name: "ml-c1-x-a"}); err != nil {
		t.Fatal(err)
	}
	_ = ox.close()
	for _, ns := range []string{"ml-c1-node", "ml-c1-a", "ml-c1-stray", "ml-c1-x-node", "ml-c1-x-a"} {
		rec.nss[ns] = true
	}
	rec.alive[4000], rec.alive[100], rec.alive[101], rec.alive[200] = 7, 11, 99, 1
	rec.pids["ml-c1-a"] = []int{100, 200, os.Getpid()}

	if err := clean(rec.system(), root, "c1", testutil.Logger(t)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"signal 4000 killed", // the lab process first, so it restarts nothing
		"signal 100 killed",  // journaled processes that are still theirs (not 101)
		"signal 200 killed",  // what else runs in its namespaces (not this process)
		"delete-netns ml-c1-node", "delete-netns ml-c1-a", "delete-netns ml-c1-stray",
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(p.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run directory left: %v", err)
	}
	if !rec.nss["ml-c1-x-node"] || !rec.nss["ml-c1-x-a"] {
		t.Fatal("clean of c1 took lab c1-x's namespaces")
	}
	// Idempotent: nothing is left to do.
	if err := clean(rec.system(), root, "c1", testutil.Logger(t)); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("second clean: %q, want nothing", got)
	}
}

func TestCleanReportsWhatItCouldNotDelete(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	rec := newRecorder()
	rec.nss["ml-c2-node"], rec.nss["ml-c2-a"] = true, true
	rec.fail["delete-netns"] = errors.New("device or resource busy")
	err := clean(rec.system(), root, "c2", testutil.Logger(t))
	testutil.CheckErr(t, "clean", err, "delete namespace ml-c2-a: device or resource busy")
	testutil.CheckErr(t, "clean", err, "delete namespace ml-c2-node: device or resource busy")
}

func TestDownAsksTheLabThenCleans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stuck bool
		want  []string
	}{
		{name: "the lab stops", want: []string{"signal 4000 terminated", "delete-netns ml-d1-node"}},
		{name: "the lab does not stop", stuck: true, want: []string{"signal 4000 terminated", "signal 4000 killed", "delete-netns ml-d1-node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			rec := newRecorder()
			p := PathsFor(root, "d1")
			if err := os.MkdirAll(p.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := writeRecord(p.Record(), &Record{Name: "d1", PID: 4000, PIDStart: 7}); err != nil {
				t.Fatal(err)
			}
			rec.nss["ml-d1-node"], rec.alive[4000], rec.stuck[4000] = true, 7, tc.stuck
			if err := down(rec.system(), root, "d1", 100*time.Millisecond, testutil.Logger(t)); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); !slices.Equal(got, tc.want) {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
		})
	}
	err := down(newRecorder().system(), t.TempDir(), "d2", time.Second, testutil.Logger(t))
	var none *NoSuchLabError
	if !errors.As(err, &none) {
		t.Fatalf("down of a lab that is not there = %v, want a NoSuchLabError", err)
	}
}

func TestStartKubeProxyPreparesTheNodeThenInstallsTheRulesItWrote(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	l := networkLab(t, rec, "kp1")
	l.opts.ServiceCIDR = DefaultServiceCIDR
	back := &model.Pod{Name: "backend-v1", Namespace: "default", IP: netip.MustParseAddr("10.244.0.7"), Labels: map[string]string{"app": "backend"}}
	svc := &model.Service{Name: "backend", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10"), Selector: map[string]string{"app": "backend"},
		Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 9080, Protocol: model.ProtocolHTTP}}}
	l.model = model.New([]*model.Service{svc}, []*model.Pod{back})
	if err := l.setupKubeProxy(); err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(l.paths.Dir, kubeProxyRulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rules), "10.96.0.10/32") || !strings.Contains(string(rules), "10.244.0.7:9080") {
		t.Fatalf("kube-proxy rules do not send 10.96.0.10:8080 to 10.244.0.7:9080:\n%s", rules)
	}
	want := []string{
		"prepare-node ml-kp1-node 10.96.0.0/16 mlbr0",
		fmt.Sprintf("apply-rules ml-kp1-node %d lines", strings.Count(string(rules), "\n")),
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	// An apply that leaves Services and endpoints as they were installs nothing.
	l.model = model.New([]*model.Service{svc}, []*model.Pod{back})
	if err := l.syncKubeProxy(); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("sync with the rules unchanged: calls %q, want none", got)
	}
	back2 := &model.Pod{Name: "backend-v2", Namespace: "default", IP: netip.MustParseAddr("10.244.0.8"), Labels: map[string]string{"app": "backend"}}
	l.model = model.New([]*model.Service{svc}, []*model.Pod{back, back2})
	rec.fail["apply-rules"] = errors.New("iptables-restore: exit status 2")
	testutil.CheckErr(t, "sync kube-proxy", l.syncKubeProxy(), "install kube-proxy rules in ml-kp1-node: iptables-restore: exit status 2")
	rec.take()
	// Rules that failed to install are installed by the next sync, though unchanged.
	delete(rec.fail, "apply-rules")
	if err := l.syncKubeProxy(); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 1 || !strings.HasPrefix(got[0], "apply-rules ml-kp1-node") {
		t.Fatalf("sync after a failed install: calls %q, want the rules applied again", got)
	}
}
