package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Per-hop figures of BenchmarkDataPath (MESHLAB_BENCH_SCHED=<dir>), for finding where a
// request's added latency at 1000 qps goes without trusting the machine's load: the
// machine's scheduler and system-call events are recorded for schedWindow in the middle
// of a cell's load (perf record -a), and for each proxy of the cell (or splice helper)
// the benchmark reports
//   - <pod>-hop-p50-us, <pod>-hop-p90-us: a hop's processing, from a read that returned
//     bytes to the same thread's next write (a request in, forwarded upstream; a
//     response in, sent downstream). A splice helper's hop is its splice(2) out of the
//     pipe after the one into it (about 1 µs: the kernel moves the bytes);
//   - <pod>-wake-p50-us: from a thread of the proxy being woken to it running;
//   - <pod>-events/wake: file descriptors ready per epoll_pwait that returned any, the
//     size of the bursts it serves (fortio's connections share one schedule, so at
//     1000 qps on 4 connections the 4 requests of each 4 ms arrive together);
//   - <pod>-futex-wakes/req: threads woken with futex(2) per request (a Go runtime that
//     finds more ready goroutines than it runs starts an idle P's thread).
//
// Recording every system call of the machine costs CPU of its own: a run that records is
// for these figures, not for the latency and rate of the same run.
const (
	schedEnv    = "MESHLAB_BENCH_SCHED"
	schedDelay  = 1500 * time.Millisecond // into the load: the fortio helper has started
	schedWindow = 500 * time.Millisecond
)

// recordSched starts recording the cell's scheduler events when MESHLAB_BENCH_SCHED
// names a directory; the returned func, called after the load, waits for the recording
// and reports the cell's per-hop figures on b.
func recordSched(b *testing.B, cell string, procs []proxyProc) (report func()) {
	b.Helper()
	dir := os.Getenv(schedEnv)
	if dir == "" || len(procs) == 0 {
		return func() {}
	}
	data := filepath.Join(dir, cell+".sched.data")
	done := make(chan error, 1)
	out := &syncBuffer{}
	go func() {
		time.Sleep(schedDelay)
		cmd := exec.Command("perf", "record", "-a", "-o", data,
			"-e", "sched:sched_switch,sched:sched_wakeup,raw_syscalls:sys_enter,raw_syscalls:sys_exit",
			"sleep", strconv.FormatFloat(schedWindow.Seconds(), 'f', 3, 64))
		cmd.Stdout, cmd.Stderr = out, out
		done <- cmd.Run()
	}()
	return func() {
		b.Helper()
		if err := <-done; err != nil {
			b.Fatalf("perf record of %s's scheduler events: %v\n%s", cell, err, out.String())
		}
		script := exec.Command("perf", "script", "-i", data, "-F", "pid,tid,time,event,trace")
		stdout, err := script.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := script.Start(); err != nil {
			b.Fatalf("perf script: %v", err)
		}
		hops := readHops(bufio.NewScanner(stdout), procs)
		if err := script.Wait(); err != nil {
			b.Fatalf("perf script -i %s: %v", data, err)
		}
		for _, pr := range procs {
			h := hops[pr.pid]
			if h == nil || len(h.hops) == 0 {
				b.Logf("%s: no hop of %s (pid %d) in the recorded window", cell, pr.pod, pr.pid)
				continue
			}
			b.ReportMetric(quantile(h.hops, 0.5), pr.pod+"-hop-p50-us")
			b.ReportMetric(quantile(h.hops, 0.9), pr.pod+"-hop-p90-us")
			if len(h.wakes) > 0 {
				b.ReportMetric(quantile(h.wakes, 0.5), pr.pod+"-wake-p50-us")
			}
			if h.epollWakes > 0 {
				b.ReportMetric(float64(h.epollEvents)/float64(h.epollWakes), pr.pod+"-events/wake")
			}
			// Two hops per request and proxy: the request's and the response's.
			b.ReportMetric(float64(h.futexWakes)/(float64(len(h.hops))/2), pr.pod+"-futex-wakes/req")
		}
	}
}

// procHops is what the recorded window shows of one process.
type procHops struct {
	hops        []float64 // µs from a read returning bytes to the thread's next write
	wakes       []float64 // µs from a thread's wake-up to it running
	epollWakes  int       // epoll_pwait calls that returned ready descriptors
	epollEvents int       // the descriptors they returned
	futexWakes  int       // FUTEX_WAKE calls
}

// System call numbers (x86-64) the hop analysis reads.
const (
	sysRead, sysWrite, sysSendto, sysRecvfrom, sysSendmsg, sysRecvmsg = 0, 1, 44, 45, 46, 47
	sysReadv, sysWritev, sysFutex, sysSplice, sysEpollPwait           = 19, 20, 202, 275, 281
)

// readHops reads `perf script -F pid,tid,time,event,trace` lines and returns, per pid of
// procs, its hops, wake-ups, epoll batches and futex wakes.
func readHops(sc *bufio.Scanner, procs []proxyProc) map[int]*procHops {
	out := map[int]*procHops{}
	tidOf := map[int]int{} // thread -> its process, for the procs' threads
	for _, pr := range procs {
		out[pr.pid] = &procHops{}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pr.pid))
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				tidOf[tid] = pr.pid
			}
		}
	}
	readAt := map[int]float64{} // thread -> when its last read returned bytes
	wokenAt := map[int]float64{}
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "15445/15473  779.402950: raw_syscalls:sys_enter: NR 0 (18, ...)"
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		ids := strings.SplitN(f[0], "/", 2)
		if len(ids) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(ids[0])
		tid, _ := strconv.Atoi(ids[1])
		at, err := strconv.ParseFloat(strings.TrimSuffix(f[1], ":"), 64)
		if err != nil {
			continue
		}
		h := out[pid]
		switch f[2] {
		case "raw_syscalls:sys_exit:": // NR n = ret
			if h == nil || len(f) < 6 {
				continue
			}
			nr, _ := strconv.Atoi(f[4])
			ret, _ := strconv.Atoi(f[6])
			switch {
			case nr == sysEpollPwait && ret > 0:
				h.epollWakes++
				h.epollEvents += ret
			case isRead(nr) && ret > 0:
				if _, pending := readAt[tid]; !pending {
					readAt[tid] = at
				}
			}
		case "raw_syscalls:sys_enter:": // NR n (args)
			if h == nil || len(f) < 6 {
				continue
			}
			nr, _ := strconv.Atoi(f[4])
			switch {
			case isWrite(nr):
				if t0, ok := readAt[tid]; ok {
					h.hops = append(h.hops, (at-t0)*1e6)
					delete(readAt, tid)
				}
			case nr == sysFutex:
				// futex(uaddr, op, ...): FUTEX_WAKE is op 1 (with FUTEX_PRIVATE_FLAG, 0x81).
				if op, err := strconv.ParseUint(strings.TrimSuffix(f[6], ","), 16, 32); err == nil && op&0x7f == 1 {
					h.futexWakes++
				}
				delete(readAt, tid)
			case nr == sysEpollPwait:
				delete(readAt, tid) // the thread went back to the poller: no write followed
			}
		case "sched:sched_wakeup:": // comm=x pid=N prio=P target_cpu=C
			for _, kv := range f[3:] {
				if v, ok := strings.CutPrefix(kv, "pid="); ok {
					if w, err := strconv.Atoi(v); err == nil {
						if _, mine := tidOf[w]; mine {
							wokenAt[w] = at
						}
					}
				}
			}
		case "sched:sched_switch:": // ... ==> next_comm=x next_pid=N next_prio=P
			for _, kv := range f[3:] {
				if v, ok := strings.CutPrefix(kv, "next_pid="); ok {
					if n, err := strconv.Atoi(v); err == nil {
						if t0, ok := wokenAt[n]; ok {
							out[tidOf[n]].wakes = append(out[tidOf[n]].wakes, (at-t0)*1e6)
							delete(wokenAt, n)
						}
					}
				}
			}
		}
	}
	return out
}

func isRead(nr int) bool {
	return nr == sysRead || nr == sysRecvfrom || nr == sysRecvmsg || nr == sysReadv || nr == sysSplice
}

func isWrite(nr int) bool {
	return nr == sysWrite || nr == sysSendto || nr == sysSendmsg || nr == sysWritev || nr == sysSplice
}

// quantile returns the q-quantile of v (sorted in place).
func quantile(v []float64, q float64) float64 {
	slices.Sort(v)
	return v[int(q*float64(len(v)-1))]
}
