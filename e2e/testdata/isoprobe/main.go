// Command isoprobe tries, from inside a pod, what an app must not be able to do to other
// pods (isolation_test.go runs it with meshlab exec). Each probe prints one line, "OK
// <what>" when the attempt succeeded or "ERR <error>" when it failed, and exits 0, so the
// test judges every result; a usage error exits 2.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	arg := func(i int) string {
		if len(os.Args) <= i {
			usage()
		}
		return os.Args[i]
	}
	pid := func(i int) int {
		if arg(i) == "self" {
			return os.Getpid()
		}
		n, err := strconv.Atoi(arg(i))
		if err != nil {
			usage()
		}
		return n
	}
	switch os.Args[1] {
	case "status": // the lines of /proc/self/status that say how the process is confined
		b, err := os.ReadFile("/proc/self/status")
		report(err, "")
		for _, l := range strings.Split(string(b), "\n") {
			for _, k := range []string{"Uid:", "NoNewPrivs:", "Seccomp:", "CapEff:", "CapBnd:"} {
				if strings.HasPrefix(l, k) {
					fmt.Println(l)
				}
			}
		}
	case "pids": // every process this one can see
		es, err := os.ReadDir("/proc")
		report(err, "")
		var pids []string
		for _, e := range es {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, e.Name())
			}
		}
		fmt.Println("PIDS " + strings.Join(pids, " "))
	case "addrs": // every address of every family on every link
		addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
		report(err, "")
		for _, a := range addrs {
			fmt.Printf("ADDR %s\n", a.IPNet)
		}
	case "dial":
		c, err := net.DialTimeout("tcp", arg(2), 3*time.Second)
		if err == nil {
			c.Close()
		}
		report(err, "connected to "+arg(2))
	case "kill": // signal 0: may this process signal pid at all?
		report(unix.Kill(pid(2), 0), "may signal "+arg(2))
	case "mem":
		f, err := os.OpenFile("/proc/"+arg(2)+"/mem", os.O_RDONLY, 0)
		if err == nil {
			f.Close()
		}
		report(err, "opened /proc/"+arg(2)+"/mem")
	case "pidfd-getfd": // take fd 0 of pid ("self": this process, allowed but for seccomp)
		pfd, err := unix.PidfdOpen(pid(2), 0)
		if err != nil {
			report(fmt.Errorf("pidfd_open: %w", err), "")
		}
		fd, err := unix.PidfdGetfd(pfd, 0, 0)
		if err == nil {
			unix.Close(fd)
		}
		report(err, "took fd 0 of "+arg(2))
	case "ptrace":
		err := unix.PtraceAttach(pid(2))
		report(err, "attached to "+arg(2))
	case "vm-read": // process_vm_readv of a word at an address of this process's in pid ("self": allowed but for seccomp)
		var src, dst uint64 = 42, 0
		local := []unix.Iovec{{Base: (*byte)(unsafe.Pointer(&dst)), Len: 8}}
		remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src)), Len: 8}}
		_, err := unix.ProcessVMReadv(pid(2), local, remote, 0)
		report(err, "read the memory of "+arg(2))
	case "read":
		b, err := os.ReadFile(arg(2))
		report(err, fmt.Sprintf("read %d bytes of %s", len(b), arg(2)))
	default:
		usage()
	}
}

func report(err error, ok string) {
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(0)
	}
	if ok != "" {
		fmt.Printf("OK %s\n", ok)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: isoprobe status|pids|addrs|dial ADDR|kill PID|mem PID|pidfd-getfd PID|ptrace PID|vm-read PID|read PATH")
	os.Exit(2)
}
