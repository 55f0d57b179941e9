package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// BenchmarkUpScale measures a 100-pod lab (50 Services x 2 replicas, issue 16) side by
// side in one run: cold `meshlab up` from process start to every pod ready (the "lab ...
// is up" line), `meshlab down` to the lab process gone, and, in the last iteration, the
// idle pods' cost: Pss per pod by process role (/proc/PID/smaps_rollup of every process
// in each pod's network namespace) and the CPU the 100 pods use over the idle window while
// nothing happens (utime+stime from /proc/PID/stat), as a percentage of one core, and
// the CPU time starting them took (per pod by role, and the lab process's). Run:
//
//	sudo go test ./e2e -run '^$' -bench '^BenchmarkUpScale$' -benchtime 3x
//
// MESHLAB_SCALE_SERVICES changes the number of Services (2 pods each).
// MESHLAB_BENCH_IDLE_SETTLE and MESHLAB_BENCH_IDLE_WINDOW (durations) change when the
// idle window starts after `up` and how long it lasts: by default 3 s and 10 s, the
// start's tail (the agents' readiness polls still backing off, the collectors in their
// steady state); 150s and 60s measure settled pods, past the idle collector's switch
// (dataplane/startgc: collections more than 60 s apart, Go's forced one every 2 min).
func BenchmarkUpScale(b *testing.B) {
	testutil.RequireRoot(b)
	services := 50
	if v := os.Getenv("MESHLAB_SCALE_SERVICES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("MESHLAB_SCALE_SERVICES=%q: want a positive number", v)
		}
		services = n
	}
	settle, window := envDuration(b, "MESHLAB_BENCH_IDLE_SETTLE", 3*time.Second), envDuration(b, "MESHLAB_BENCH_IDLE_WINDOW", 10*time.Second)
	scenario := filepath.Join(b.TempDir(), "scale.yaml")
	if err := os.WriteFile(scenario, []byte(replicatedScenario(services, 2)), 0o644); err != nil {
		b.Fatal(err)
	}
	meshlabBin(b) // built before the clock starts
	var ups, downs []time.Duration
	var idle *idleCost
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		l := startLabWithin(b, lab.ReadyTimeoutFor(services*2)+30*time.Second, scenario)
		ups = append(ups, time.Since(start))
		b.StopTimer()
		// "is up" is also said of a lab whose late pods failed ("407 of 500 pods ready"):
		// their cost would be measured as idle pods'.
		if want := fmt.Sprintf("lab %s is up: %d pods ready", l.name, services*2); !strings.Contains(l.out.String(), want) {
			b.Fatalf("not every pod became ready, want %q:\n%s", want, lastLines(l.out.String(), 20))
		}
		if i == b.N-1 {
			c, err := measureIdle(l, services*2, settle, window)
			if err != nil {
				b.Fatal(err)
			}
			idle = c
		}
		b.StartTimer()
		start = time.Now()
		if out, err := meshlab(b, "down", "--name", l.name); err != nil {
			b.Fatalf("down: %v\n%s", err, out)
		}
		<-l.exited
		downs = append(downs, time.Since(start))
		b.StopTimer()
		assertNothingLeft(b, l.name)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(median(ups).Seconds(), "up-s")
	b.ReportMetric(median(downs).Seconds(), "down-s")
	pods := float64(services * 2)
	var pssTotal float64
	for _, kb := range idle.pss {
		pssTotal += kb
	}
	for _, role := range podRoles {
		b.ReportMetric(idle.pss[role]/pods/1024, "pss-"+role+"-MB/pod")
		b.ReportMetric(idle.cpu[role], "idle-cpu-"+role+"-%core")
	}
	b.ReportMetric(pssTotal/pods/1024, "pss-MB/pod")
	b.ReportMetric(idle.total(), "idle-cpu-%core")
	b.ReportMetric(idle.labCPU, "idle-cpu-lab-%core")
	for _, role := range podRoles {
		b.ReportMetric(idle.startCPU[role]/pods*1000, "start-cpu-"+role+"-ms/pod")
	}
	b.ReportMetric(idle.labStart, "start-cpu-lab-s")
	b.Logf("%d pods, %d processes measured; idle window %s from %s after up", services*2, idle.procs, window, settle)
}

// podRoles are the processes of a sidecar pod, by what they run.
var podRoles = []string{"podinit", "agent", "proxy", "app"}

// envDuration is the duration in the environment variable name, else def; a value that
// is not a positive duration fails b, naming the variable.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration (e.g. 60s)", name, v)
	}
	return d
}

// replicatedScenario is services Services, svc-00 ..., each selecting a demo-app Workload
// of replicas pods.
func replicatedScenario(services, replicas int) string {
	var docs []string
	for i := range services {
		name := fmt.Sprintf("svc-%02d", i)
		docs = append(docs,
			fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {selector: {app: %s}, ports: [{name: http, port: 8080}]}\n", name, name),
			fmt.Sprintf("apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: %s}\nspec: {replicas: %d, labels: {app: %s}, ports: [8080], app: {}}\n", name, replicas, name))
	}
	return strings.Join(docs, "---\n")
}

// podInitRole is the role of the pod-init process at /proc dir: "podinit" while it runs as
// root (the reaper of an app it forked), "app" once it runs as the app's uid (it became
// the app: podinit's InProcess).
func podInitRole(dir string) string {
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) == nil && st.Uid != 0 {
		return "app"
	}
	return "podinit"
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// idleCost is what the idle pods of a lab cost: Pss in kB and CPU in percent of one core,
// by role, and the lab process's own CPU; and what starting them cost: the CPU seconds
// the pods' processes and the lab process had used when the window began.
type idleCost struct {
	pss      map[string]float64
	cpu      map[string]float64
	labCPU   float64
	procs    int
	startCPU map[string]float64
	labStart float64
}

func (c *idleCost) total() float64 {
	var t float64
	for _, v := range c.cpu {
		t += v
	}
	return t
}

// measureIdle lets the lab settle, then measures its pods' CPU over window and their
// Pss at the end of it. It fails when a pod has no process of some role: the measurement
// would be wrong.
func measureIdle(l *runningLab, pods int, settle, window time.Duration) (*idleCost, error) {
	time.Sleep(settle) // at least past the first stats flush and the proxies' first memory trim
	procs, err := podProcesses(l.name)
	if err != nil {
		return nil, err
	}
	if n := len(procs["agent"]); n != pods {
		return nil, fmt.Errorf("found %d agents, want %d", n, pods)
	}
	labPID := l.cmd.Process.Pid
	before := map[int]uint64{}
	for _, ps := range procs {
		for _, p := range ps {
			before[p], _ = procCPUTicks(p)
		}
	}
	labBefore, err := procCPUTicks(labPID)
	if err != nil {
		return nil, err
	}
	time.Sleep(window)
	c := &idleCost{pss: map[string]float64{}, cpu: map[string]float64{}, startCPU: map[string]float64{},
		labStart: float64(labBefore) / clockTicks}
	for role, ps := range procs {
		for _, p := range ps {
			c.startCPU[role] += float64(before[p]) / clockTicks
		}
	}
	pct := func(ticks uint64) float64 {
		return float64(ticks) / clockTicks / window.Seconds() * 100
	}
	for role, ps := range procs {
		for _, p := range ps {
			after, err := procCPUTicks(p)
			if err != nil {
				return nil, fmt.Errorf("%s process %d exited while the lab was idle: %w", role, p, err)
			}
			c.cpu[role] += pct(after - before[p])
			kb, err := pssKB(p)
			if err != nil {
				return nil, err
			}
			c.pss[role] += kb
			c.procs++
		}
	}
	labAfter, err := procCPUTicks(labPID)
	if err != nil {
		return nil, err
	}
	c.labCPU = pct(labAfter - labBefore)
	return c, nil
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// podProcesses returns the processes in the network namespaces of lab's pods by role
// (podRoles, or "other").
func podProcesses(labName string) (map[string][]int, error) {
	rec, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, labName))
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, p := range rec.Pods {
		var st syscall.Stat_t
		if err := syscall.Stat(netns.Path(p.NetNS), &st); err != nil {
			return nil, fmt.Errorf("stat namespace of pod %s: %w", p.Name, err)
		}
		inodes[st.Ino] = true
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		var st syscall.Stat_t
		if syscall.Stat(d+"/ns/net", &st) != nil || !inodes[st.Ino] {
			continue
		}
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(cmd), "\x00")
		role := "other"
		switch {
		case filepath.Base(argv[0]) == "meshlab-pod-init":
			role = podInitRole(d)
		case filepath.Base(argv[0]) == lab.SmallAppName:
			role = "app"
		case len(argv) > 1 && (argv[1] == "agent" || argv[1] == "proxy" || argv[1] == "app"):
			role = argv[1]
		}
		out[role] = append(out[role], pid)
	}
	return out, nil
}

// procCPUTicks is utime+stime of pid, in clock ticks.
func procCPUTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return ut + st, nil
}

// pssKB is the Pss of pid in kB (/proc/PID/smaps_rollup).
func pssKB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
		}
	}
	return 0, fmt.Errorf("no Pss line in /proc/%d/smaps_rollup", pid)
}

// BenchmarkAmbientUpScale measures ambient labs (issue 26's "Performance and scale"):
// pods that carry only their app, in a namespace labelled istio.io/dataplane-mode=ambient,
// written as scenarios/ambient.yaml is (Namespace, Services, Deployments of Istio's
// go-httpbin image). For each size, side by side in one run:
//   - up-s: cold `meshlab up` from process start to "is up" (every pod enrolled: its
//     in-pod rules installed, ztunnel's ZDS ack, the redirection annotation pushed);
//   - serving-s: from process start until every pod has answered an HTTP GET sent from
//     the next pod's network namespace, so through both pods' in-pod rules, the client's
//     ztunnel socket, HBONE and the server's (target at 100 pods: <= 3 s);
//   - down-s: `meshlab down` to the lab process gone;
//   - in the last iteration, the whole lab's memory: Pss of every process in the lab's
//     network namespaces (the apps, their pod-init reapers, ztunnel) and of the lab
//     process, by role (target at 1000 pods: <= 6 GB), and the machine's MemAvailable
//     before `up` minus while up (kernel memory included: namespaces, links, rules, socket
//     buffers; other users of the machine move it too).
//
// Run:
//
//	sudo go test ./e2e -run '^$' -bench 'AmbientUpScale/pods=100$' -benchtime 3x
//	sudo go test ./e2e -run '^$' -bench 'AmbientUpScale/pods=1000$' -benchtime 1x
//
// The 1000-pod lab needs the host's neighbour table limit raised (it is skipped, saying
// how, when net.ipv4.neigh.default.gc_thresh3 is under 2 entries per pod).
func BenchmarkAmbientUpScale(b *testing.B) {
	testutil.RequireRoot(b)
	for _, pods := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) { benchAmbientUp(b, pods) })
	}
}

func benchAmbientUp(b *testing.B, pods int) {
	b.Helper()
	const replicas = 2
	// Every pod's neighbour (ARP) entries count against one host-wide limit (the lab warns
	// of it): past it, connections between pods fail and the pods never all serve.
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/neigh/default/gc_thresh3"); err == nil {
		if limit, _ := strconv.Atoi(strings.TrimSpace(string(raw))); limit < 2*pods {
			b.Skipf("%d pods need about %d neighbour entries, more than the host's net.ipv4.neigh.default.gc_thresh3 = %d: raise it for the run (sysctl -w net.ipv4.neigh.default.gc_thresh1=4000 net.ipv4.neigh.default.gc_thresh2=8000 net.ipv4.neigh.default.gc_thresh3=16000)", pods, 2*pods, limit)
		}
	}
	scenario := filepath.Join(b.TempDir(), "ambient-scale.yaml")
	if err := os.WriteFile(scenario, []byte(ambientScaleScenario(pods/replicas, replicas)), 0o644); err != nil {
		b.Fatal(err)
	}
	meshlabBin(b) // built before the clock starts
	var ups, servings, downs []time.Duration
	var mem *labMemory
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		availBefore, err := memAvailableKB()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		l := startLabWithin(b, lab.ReadyTimeoutFor(pods)+60*time.Second, scenario)
		ups = append(ups, time.Since(start))
		if want := fmt.Sprintf("lab %s is up: %d pods ready", l.name, pods); !strings.Contains(l.out.String(), want) {
			b.Fatalf("not every pod became ready, want %q:\n%s", want, lastLines(l.out.String(), 20))
		}
		if err := waitAllServing(b, l.name, pods, 2*time.Minute); err != nil {
			b.Fatal(err)
		}
		servings = append(servings, time.Since(start))
		b.StopTimer()
		if i == b.N-1 {
			m, err := measureLabMemory(l)
			if err != nil {
				b.Fatal(err)
			}
			if availUp, err := memAvailableKB(); err == nil {
				m.availDropKB = availBefore - availUp
			}
			mem = m
		}
		b.StartTimer()
		start = time.Now()
		if out, err := meshlab(b, "down", "--name", l.name); err != nil {
			b.Fatalf("down: %v\n%s", err, out)
		}
		<-l.exited
		downs = append(downs, time.Since(start))
		b.StopTimer()
		assertNothingLeft(b, l.name)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(ups).Seconds(), "up-s")
	b.ReportMetric(median(servings).Seconds(), "serving-s")
	b.ReportMetric(median(downs).Seconds(), "down-s")
	var total float64
	for role, kb := range mem.pss {
		total += kb
		b.ReportMetric(kb/1024, "pss-"+role+"-MB")
	}
	b.ReportMetric(total/1024/1024, "pss-lab-GB")
	b.ReportMetric(mem.pss["app"]/1024/float64(pods), "pss-app-MB/pod")
	var cpu float64
	for role, s := range mem.cpu {
		cpu += s
		b.ReportMetric(s, "start-cpu-"+role+"-s")
	}
	b.ReportMetric(cpu, "start-cpu-s")
	b.ReportMetric(float64(mem.availDropKB)/1024/1024, "memavail-drop-GB")
	b.Logf("%d pods: %d processes measured: %v", pods, mem.procs, mem.count)
}

// ambientScaleScenario is an ambient namespace of services Services, svc-00 ..., each
// selecting a Deployment of replicas go-httpbin pods (the built-in app's httpbin persona
// on 8080), in the form of scenarios/ambient.yaml.
func ambientScaleScenario(services, replicas int) string {
	docs := []string{"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n  labels:\n    istio.io/dataplane-mode: ambient\n"}
	for i := range services {
		name := fmt.Sprintf("svc-%02d", i)
		docs = append(docs,
			fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec:\n  selector: {app: %s}\n  ports: [{name: http, port: 8080}]\n", name, name),
			fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: httpbin
        image: docker.io/mccutchen/go-httpbin:v2.15.0
        ports:
        - containerPort: 8080
`, name, replicas))
	}
	return strings.Join(docs, "---\n")
}

// waitAllServing waits until every pod of the lab has answered a GET /get sent from the
// next pod's network namespace (pod i+1 calls pod i), i.e. through ztunnel and HBONE.
func waitAllServing(b *testing.B, name string, want int, within time.Duration) error {
	b.Helper()
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, name).APISocket())
	defer lc.Close()
	list, err := lc.Pods(b.Context())
	if err != nil {
		return err
	}
	var pods []api.PodStatus
	for _, p := range list {
		if p.Namespace == "default" {
			pods = append(pods, p)
		}
	}
	if len(pods) != want {
		return fmt.Errorf("lab has %d pods in default, want %d", len(pods), want)
	}
	deadline := time.Now().Add(within)
	pending := make([]int, len(pods))
	for i := range pending {
		pending[i] = i
	}
	var lastErr error
	for len(pending) > 0 {
		var next []int
		var mu sync.Mutex
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for _, i := range pending {
			from, to := pods[(i+1)%len(pods)], pods[i]
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				err := getOnce(from.NetNS, "http://"+net.JoinHostPort(to.IP.String(), "8080")+"/get")
				if err != nil {
					mu.Lock()
					next = append(next, i)
					lastErr = fmt.Errorf("%s -> %s: %w", from.Name, to.Name, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		pending = next
		if len(pending) > 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d pods not serving after %s; last: %w", len(pending), len(pods), within, lastErr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// getOnce sends one GET from network namespace ns on a new connection and wants a 200.
func getOnce(ns, url string) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.DialContext(ctx, ns, network, addr)
		},
	}}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// labMemory is the Pss of a lab's processes in kB, by role.
type labMemory struct {
	pss         map[string]float64
	cpu         map[string]float64 // CPU seconds used so far (utime+stime; the lab's with its reaped children's)
	count       map[string]int
	procs       int
	availDropKB int64
}

// measureLabMemory sums the Pss of every process in the lab's network namespaces and of
// the lab process, by role: app, podinit, ztunnel, lab, other.
func measureLabMemory(l *runningLab) (*labMemory, error) {
	nss, err := netns.List("ml-" + l.name + "-")
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, ns := range nss {
		var st syscall.Stat_t
		if err := syscall.Stat(netns.Path(ns), &st); err == nil {
			inodes[st.Ino] = true
		}
	}
	m := &labMemory{pss: map[string]float64{}, cpu: map[string]float64{}, count: map[string]int{}}
	add := func(role string, pid int) {
		kb, err := pssKB(pid)
		if err != nil {
			return // exited meanwhile
		}
		if ticks, err := procCPUTicks(pid); err == nil {
			m.cpu[role] += float64(ticks) / clockTicks
		}
		m.pss[role] += kb
		m.count[role]++
		m.procs++
	}
	add("lab", l.cmd.Process.Pid)
	// The lab's reaped children: iptables-restore and -save, ip, the tools it runs.
	if ticks, err := procChildCPUTicks(l.cmd.Process.Pid); err == nil {
		m.cpu["lab-tools"] = float64(ticks) / clockTicks
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if pid == l.cmd.Process.Pid {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(d+"/ns/net", &st) != nil || !inodes[st.Ino] {
			continue
		}
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(cmd), "\x00")
		role := "other"
		switch {
		case filepath.Base(argv[0]) == "meshlab-pod-init":
			role = podInitRole(d)
		case filepath.Base(argv[0]) == lab.SmallAppName:
			role = "app"
		case len(argv) > 1 && (argv[1] == "app" || argv[1] == "ztunnel"):
			role = argv[1]
		}
		add(role, pid)
	}
	if m.count["ztunnel"] != 1 {
		return nil, fmt.Errorf("found %d ztunnel processes, want 1", m.count["ztunnel"])
	}
	return m, nil
}

// procChildCPUTicks is cutime+cstime of pid: the CPU of its children it has waited for.
func procChildCPUTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	// cutime and cstime are fields 16 and 17.
	ut, err1 := strconv.ParseUint(f[13], 10, 64)
	st, err2 := strconv.ParseUint(f[14], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: cutime %q cstime %q", pid, f[13], f[14])
	}
	return ut + st, nil
}

// memAvailableKB is MemAvailable of /proc/meminfo.
func memAvailableKB() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}
