package e2e

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestReadHops reads a recorded window of a proxy serving a burst of two requests, as
// `perf script -F pid,tid,time,event,trace` prints it: the poller's thread woken after
// 30 µs, two descriptors ready, a futex wake of a second thread, each request read and
// forwarded 12 and 8 µs later; a thread of another process is left out.
func TestReadHops(t *testing.T) {
	pid := os.Getpid() // a process whose /proc/<pid>/task lists this thread
	trace := strings.NewReplacer("P/", strconv.Itoa(pid)+"/", "=T ", "="+strconv.Itoa(pid)+" ").Replace(`
P/P  10.000000:     sched:sched_wakeup: comm=x pid=T prio=120 target_cpu=001
9/9  10.000030:     sched:sched_switch: prev_comm=y prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=x next_pid=T next_prio=120
P/P  10.000031:  raw_syscalls:sys_exit: NR 281 = 2
P/P  10.000032: raw_syscalls:sys_enter: NR 202 (c000, 81, 1, 0, 0, 0)
P/P  10.000033:  raw_syscalls:sys_exit: NR 202 = 1
P/P  10.000034: raw_syscalls:sys_enter: NR 0 (7, c000, 1000, 0, 0, 0)
P/P  10.000035:  raw_syscalls:sys_exit: NR 0 = 738
P/P  10.000047: raw_syscalls:sys_enter: NR 1 (9, c000, 226, 0, 0, 0)
P/P  10.000050:  raw_syscalls:sys_exit: NR 1 = 226
P/P  10.000051: raw_syscalls:sys_enter: NR 0 (8, c000, 1000, 0, 0, 0)
P/P  10.000052:  raw_syscalls:sys_exit: NR 0 = 738
P/P  10.000060: raw_syscalls:sys_enter: NR 1 (10, c000, 226, 0, 0, 0)
P/P  10.000062:  raw_syscalls:sys_exit: NR 1 = 226
P/P  10.000063: raw_syscalls:sys_enter: NR 0 (8, c000, 1000, 0, 0, 0)
P/P  10.000064:  raw_syscalls:sys_exit: NR 0 = -11
P/P  10.000065: raw_syscalls:sys_enter: NR 281 (6, c000, 80, 0, 0, 0)
9/9  10.000070:  raw_syscalls:sys_exit: NR 0 = 100
9/9  10.000090: raw_syscalls:sys_enter: NR 1 (3, c000, 100, 0, 0, 0)
`)
	hops := readHops(bufio.NewScanner(strings.NewReader(trace)), []proxyProc{{pod: "client", pid: pid}})
	h := hops[pid]
	if len(hops) != 1 || h == nil {
		t.Fatalf("hops of %v, want only pid %d", hops, pid)
	}
	if len(h.hops) != 2 || int(h.hops[0]+0.5) != 12 || int(h.hops[1]+0.5) != 8 {
		t.Errorf("hops %v µs, want [12 8]", h.hops)
	}
	if len(h.wakes) != 1 || int(h.wakes[0]+0.5) != 30 {
		t.Errorf("wake-ups %v µs, want [30]", h.wakes)
	}
	if h.epollWakes != 1 || h.epollEvents != 2 || h.futexWakes != 1 {
		t.Errorf("epoll %d wakes with %d events, %d futex wakes; want 1, 2, 1", h.epollWakes, h.epollEvents, h.futexWakes)
	}
}
