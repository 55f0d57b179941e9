package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// BenchmarkIstiodControlPlane measures the hello lab on both control planes in one run,
// meshlab's generator first, then istiod (bin/meshlab-istiod, `make istiod`): `up` from
// process start to every pod ready, median of b.N; on the last lab, a VirtualService
// change (backend's route flipped between subsets v1 and v2, 10 times) from the start of
// `meshlab apply` to the last RDS ACK of every proxy it reached (the proxies' own ACK
// times, from the lab API's proxy-status); and the lab's memory, the proportional set size of the `up`
// process and everything under it, istiod's part named. Run:
//
//	sudo go test ./e2e -run '^$' -bench IstiodControlPlane -benchtime 3x
//
// istiod's debounce is meshlab-istiod's default, 100 ms (PILOT_DEBOUNCE_AFTER's).
func BenchmarkIstiodControlPlane(b *testing.B) {
	testutil.RequireRoot(b)
	bin := istiodBin(b)
	for _, cp := range []string{"meshlab", "istiod"} {
		b.Run(cp, func(b *testing.B) {
			args := []string{"--control-plane=" + cp}
			if cp == "istiod" {
				args = append(args, "--istiod-path", bin)
			}
			var ups []time.Duration
			var l *runningLab
			for i := 0; i < b.N; i++ {
				if l != nil {
					if out, err := meshlab(b, "down", "--name", l.name); err != nil {
						b.Fatalf("down: %v\n%s", err, out)
					}
					<-l.exited
				}
				start := time.Now()
				l = startLab(b, args...)
				ups = append(ups, time.Since(start))
			}
			b.ReportMetric(ms(median(ups)), "median-up-ms")

			conv, reached := vsConvergence(b, l.name, 10)
			b.ReportMetric(ms(median(conv)), "vs-median-ms")
			b.ReportMetric(ms(slices.Max(conv)), "vs-max-ms")
			b.ReportMetric(float64(reached), "vs-proxies")

			total, istiod := labPss(b, l)
			b.ReportMetric(float64(total)/1024, "lab-pss-MiB")
			b.ReportMetric(float64(istiod)/1024, "istiod-pss-MiB")
			b.Logf("%s: up %v; VS convergence %v (reached %d proxies); Pss %d KiB (istiod %d KiB)", cp, ups, conv, reached, total, istiod)
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// vsConvergence flips backend's route between its subsets n times and returns, for each
// change, the time from just before the lab API's apply call (no CLI start) to the last
// RDS ACK of the proxies the change reached, and how many proxies the last change
// reached. A change has converged once every proxy is SYNCED and no further proxy ACKed
// RDS for 1 s (istiod's debounce and push are well inside that).
func vsConvergence(b *testing.B, labName string, n int) ([]time.Duration, int) {
	b.Helper()
	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, labName).APISocket())
	defer c.Close()
	ctx := b.Context()
	dr := "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: backend}\nspec:\n  host: backend\n  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2, labels: {version: v2}}\n"
	if _, err := c.Apply(ctx, []api.ConfigFile{{Name: "dr.yaml", Data: dr}}); err != nil {
		b.Fatalf("apply DestinationRule: %v", err)
	}
	time.Sleep(2 * time.Second) // istiod's push of the DestinationRule, before the first timed change
	var out []time.Duration
	reached := 0
	for i := range n {
		vs := fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: backend}\nspec:\n  hosts: [backend]\n  http:\n  - route:\n    - destination: {host: backend, subset: v%d}\n", 1+i%2)
		t0 := time.Now()
		if _, err := c.Apply(ctx, []api.ConfigFile{{Name: "vs.yaml", Data: vs}}); err != nil {
			b.Fatalf("apply VirtualService: %v", err)
		}
		last, count := time.Time{}, 0
		quiet := time.Now()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ps, err := c.ProxyStatus(ctx)
			if err != nil {
				b.Fatalf("proxy-status: %v", err)
			}
			acks, synced := rdsAcksSince(ps, t0)
			if len(acks) != count {
				count, quiet = len(acks), time.Now()
				last = slices.MaxFunc(acks, time.Time.Compare)
			}
			if synced && count > 0 && time.Since(quiet) > time.Second {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("VirtualService change %d: not converged within 30 s (%d proxies ACKed RDS)", i, count)
			}
			time.Sleep(20 * time.Millisecond)
		}
		out = append(out, last.Sub(t0))
		reached = count
	}
	return out, reached
}

// rdsAcksSince returns the RDS ACK times after t0 of the proxies, and whether every
// proxy is SYNCED on every type.
func rdsAcksSince(ps []api.ProxyStatus, t0 time.Time) ([]time.Time, bool) {
	var acks []time.Time
	synced := true
	for _, p := range ps {
		for _, ts := range p.Types {
			if ts.State() != "SYNCED" {
				synced = false
			}
		}
		if a := p.Types["RDS"].LastAck; a.After(t0) {
			acks = append(acks, a)
		}
	}
	return acks, synced
}

// labPss returns the proportional set size (KiB) of the lab's `up` process with every
// process under it, and of istiod among them (0 on meshlab's generator).
func labPss(b *testing.B, l *runningLab) (total, istiod int) {
	b.Helper()
	rec, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, l.name))
	if err != nil {
		b.Fatal(err)
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, the last ')' ends it.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	todo := []int{l.cmd.Process.Pid}
	for len(todo) > 0 {
		pid := todo[0]
		todo = append(todo[1:], children[pid]...)
		kb, err := pssKB(pid)
		if err != nil {
			continue // exited meanwhile
		}
		total += int(kb)
		if pid == rec.IstiodPID {
			istiod = int(kb)
		}
	}
	return total, istiod
}
