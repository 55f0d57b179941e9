package podinit

import (
	"testing"

	"golang.org/x/sys/unix"
)

// runFilter interprets the classic BPF subset seccompProgram uses against one call.
func runFilter(t *testing.T, prog []unix.SockFilter, arch, nr uint32) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLdAbsW:
			switch in.K {
			case offArch:
				acc = arch
			case offNr:
				acc = nr
			default:
				t.Fatalf("load of offset %d", in.K)
			}
		case bpfJeqK, bpfJgeK:
			match := acc == in.K
			if in.Code == bpfJgeK {
				match = acc >= in.K
			}
			if match {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfRetK:
			return in.K
		default:
			t.Fatalf("opcode %#x", in.Code)
		}
	}
	t.Fatal("the filter ran off its end")
	return 0
}

func TestSeccompProgram(t *testing.T) {
	prog := seccompProgram(unix.AUDIT_ARCH_X86_64)
	for _, s := range blockedSyscalls {
		if got := runFilter(t, prog, unix.AUDIT_ARCH_X86_64, s.nr); got != retEPERM {
			t.Errorf("%s: %#x, want EPERM", s.name, got)
		}
		if got := runFilter(t, prog, unix.AUDIT_ARCH_X86_64, s.nr|x32SysBit); got != retEPERM {
			t.Errorf("%s through the x32 ABI: %#x, want EPERM", s.name, got)
		}
	}
	for name, nr := range map[string]uint32{"read": 0, "clone3": 435, "pidfd_open": 434, "kill": 62, "openat": 257} {
		if got := runFilter(t, prog, unix.AUDIT_ARCH_X86_64, nr); got != retAllow {
			t.Errorf("%s: %#x, want allowed", name, got)
		}
	}
	if got := runFilter(t, prog, unix.AUDIT_ARCH_I386, 26 /* ptrace on i386 */); got != retKillProc {
		t.Errorf("a call through the i386 ABI: %#x, want the process killed", got)
	}
	arm := seccompProgram(unix.AUDIT_ARCH_AARCH64)
	if got := runFilter(t, arm, unix.AUDIT_ARCH_AARCH64, 0x40000001); got != retAllow {
		t.Errorf("arm64 has no x32 ABI: nr 0x40000001 = %#x, want allowed (the kernel answers ENOSYS)", got)
	}
}
