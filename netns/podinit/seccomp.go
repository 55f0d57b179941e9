package podinit

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// blockedSyscalls reach into another process's memory, file descriptors or state: an app
// gets EPERM for each, whatever the target (a container runtime's default profile refuses
// them to unprivileged containers too).
var blockedSyscalls = []struct {
	name string
	nr   uint32
}{
	{"ptrace", unix.SYS_PTRACE},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
	{"process_madvise", unix.SYS_PROCESS_MADVISE},
	{"kcmp", unix.SYS_KCMP},
}

// seccompArch is the AUDIT_ARCH of the filter: the syscall numbers above are this
// architecture's, and a call made through another ABI is killed.
func seccompArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("seccomp filter: architecture %s not supported", runtime.GOARCH)
}

// Classic BPF opcodes and seccomp_data offsets (linux/filter.h, linux/seccomp.h).
const (
	bpfLdAbsW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK     = unix.BPF_RET | unix.BPF_K
	offNr       = 0
	offArch     = 4
	x32SysBit   = 0x40000000 // x86-64's x32 ABI: the same calls with this bit set
	retAllow    = unix.SECCOMP_RET_ALLOW
	retEPERM    = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retKillProc = unix.SECCOMP_RET_KILL_PROCESS
)

// seccompProgram builds the filter: a call of another architecture kills the process; on
// x86-64 every x32 call is refused; every blocked call returns EPERM; the rest is allowed.
func seccompProgram(arch uint32) []unix.SockFilter {
	checks := []unix.SockFilter{}
	if arch == unix.AUDIT_ARCH_X86_64 {
		checks = append(checks, unix.SockFilter{Code: bpfJgeK, K: x32SysBit})
	}
	for _, s := range blockedSyscalls {
		checks = append(checks, unix.SockFilter{Code: bpfJeqK, K: s.nr})
	}
	// Each check jumps, when it matches, over the checks after it and the allow.
	for i := range checks {
		checks[i].Jt = uint8(len(checks) - i)
	}
	prog := []unix.SockFilter{
		{Code: bpfLdAbsW, K: offArch},
		{Code: bpfJeqK, Jt: 1, K: arch},
		{Code: bpfRetK, K: retKillProc},
		{Code: bpfLdAbsW, K: offNr},
	}
	prog = append(prog, checks...)
	return append(prog, unix.SockFilter{Code: bpfRetK, K: retAllow}, unix.SockFilter{Code: bpfRetK, K: retEPERM})
}

// installSeccomp installs the filter on the calling thread, or with all on every thread
// of the process (no_new_privs must be set on each).
func installSeccomp(all bool) error {
	arch, err := seccompArch()
	if err != nil {
		return err
	}
	prog := seccompProgram(arch)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	ptr := uintptr(unsafe.Pointer(&fprog))
	if all {
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, ptr); e != 0 {
			err = e
		}
	} else {
		err = unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, ptr, 0, 0)
	}
	runtime.KeepAlive(prog)
	if err != nil {
		return fmt.Errorf("install seccomp filter: %w", err)
	}
	return nil
}
