package podinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The pod's init, once the app runs, only reaps and passes signals on; a Go process
// doing that stays resident with its runtime, heap and the pages of the binary it touched
// (3.3 MB of Pss per pod). So the init replaces itself with the reaper: a static ELF of
// some 350 bytes (no runtime, no libc; testdata/reaper_amd64.s) that this package writes
// to a memfd and execs. exec keeps the pid (1 of the pod's PID namespace), the children
// (the app), the argv (netns.PodInit reads the Sandbox from it) and the credentials of the
// thread that execs: the main thread, which is not restricted (RestrictThread's thread
// forked the app and ended), so the reaper may signal the app's uid as the Go init did.
// Where no reaper is written (reaperCode empty) or a memfd cannot be executed
// (vm.memfd_noexec), the Go init stays and netns runs the same loop (netns.reap).

// errNoReaper says this architecture has no reaper: the Go init stays.
var errNoReaper = errors.New("no reaper for this architecture")

// reaperELF is reaperCode as an executable: one ELF header, a PT_LOAD of the whole file
// (read, execute) and a PT_GNU_STACK (read, write: the stack is not executable).
func reaperELF() []byte {
	const (
		base     = 0x400000
		ehSize   = 64
		phSize   = 56
		phNum    = 2
		codeOff  = ehSize + phNum*phSize
		ptLoad   = 1
		ptStack  = 0x6474e551
		pfX, pfW = 1, 2
		pfR      = 4
	)
	b := make([]byte, codeOff+len(reaperCode))
	put := func(off, size int, v uint64) {
		for i := range size {
			b[off+i] = byte(v >> (8 * i))
		}
	}
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // 64-bit, little-endian, version 1
	put(16, 2, 2)              // ET_EXEC
	put(18, 2, reaperMachine)
	put(20, 4, 1)
	put(24, 8, base+codeOff) // entry
	put(32, 8, ehSize)       // program headers
	put(52, 2, ehSize)
	put(54, 2, phSize)
	put(56, 2, phNum)
	put(58, 2, 64) // section header size (there are none)
	ph := ehSize
	put(ph, 4, ptLoad)
	put(ph+4, 4, pfR|pfX)
	put(ph+16, 8, base) // vaddr
	put(ph+24, 8, base) // paddr
	put(ph+32, 8, uint64(len(b)))
	put(ph+40, 8, uint64(len(b)))
	put(ph+48, 8, 0x1000)
	ph += phSize
	put(ph, 4, ptStack)
	put(ph+4, 4, pfR|pfW)
	put(ph+48, 8, 16)
	copy(b[codeOff:], reaperCode)
	return b
}

// execReaper replaces this process with the reaper of app (a child of this process). It
// returns only on failure, this process unchanged but for a closed memfd.
func execReaper(app int, argv []string) error {
	if len(reaperCode) == 0 {
		return errNoReaper
	}
	fd, err := unix.MemfdCreate(Arg0, unix.MFD_CLOEXEC|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // before Linux 6.3, which added MFD_EXEC
		fd, err = unix.MemfdCreate(Arg0, unix.MFD_CLOEXEC)
	}
	if err != nil {
		return fmt.Errorf("create the reaper's memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), Arg0)
	defer f.Close()
	if _, err := f.Write(reaperELF()); err != nil {
		return fmt.Errorf("write the reaper: %w", err)
	}
	// By path rather than execveat(AT_EMPTY_PATH): syscall.Exec is the runtime's exec. The
	// pod's /proc is mounted (mountAll) and close-on-exec does not matter to an ELF.
	path := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := syscall.Exec(path, argv, []string{strconv.Itoa(app)}); err != nil {
		return fmt.Errorf("exec the reaper %s: %w", path, err)
	}
	return nil
}
