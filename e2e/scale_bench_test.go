package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// BenchmarkUpScale measures a 100-pod lab (50 Services x 2 replicas, issue 16) side by
// side in one run: cold `meshlab up` from process start to every pod ready (the "lab ...
// is up" line), `meshlab down` to the lab process gone, and, in the last iteration, the
// idle pods' cost: Pss per pod by process role (/proc/PID/smaps_rollup of every process
// in each pod's network namespace) and the CPU the 100 pods use over idleWindow while
// nothing happens (utime+stime from /proc/PID/stat), as a percentage of one core, and
// the CPU time starting them took (per pod by role, and the lab process's). Run:
//
//	sudo go test ./e2e -run '^$' -bench UpScale -benchtime 3x
//
// MESHLAB_SCALE_SERVICES changes the number of Services (2 pods each).
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
			c, err := measureIdle(l, services*2)
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
	b.Logf("%d pods, %d processes measured; idle window %s", services*2, idle.procs, idleWindow)
}

// podRoles are the processes of a sidecar pod, by what they run.
var podRoles = []string{"podinit", "agent", "proxy", "app"}

// idleWindow is how long the idle pods' CPU is measured.
const idleWindow = 10 * time.Second

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

// measureIdle lets the lab settle, then measures its pods' CPU over idleWindow and their
// Pss at the end of it. It fails when a pod has no process of some role: the measurement
// would be wrong.
func measureIdle(l *runningLab, pods int) (*idleCost, error) {
	time.Sleep(3 * time.Second) // past the first stats flush and the proxies' first memory trim
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
	time.Sleep(idleWindow)
	c := &idleCost{pss: map[string]float64{}, cpu: map[string]float64{}, startCPU: map[string]float64{},
		labStart: float64(labBefore) / clockTicks}
	for role, ps := range procs {
		for _, p := range ps {
			c.startCPU[role] += float64(before[p]) / clockTicks
		}
	}
	pct := func(ticks uint64) float64 {
		return float64(ticks) / clockTicks / idleWindow.Seconds() * 100
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
			role = "podinit"
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
