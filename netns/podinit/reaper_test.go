package podinit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reaperHelperEnv, set, makes the test binary start `sh -c $value` and exec the reaper
// for it, as the pod's init does once the app runs.
const reaperHelperEnv = "MESHLAB_TEST_REAPER_APP"

func TestMain(m *testing.M) {
	if script := os.Getenv(reaperHelperEnv); script != "" {
		argv := []string{"/bin/sh", "-c", script}
		pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
		if err == nil {
			err = execReaper(pid, []string{Arg0, "{}", "/bin/sh"})
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(120)
	}
	os.Exit(m.Run())
}

// startReaper runs script as the app of a reaper and waits until the reaper has taken
// over (the process is the memfd's ELF and blocks the signals it passes on).
func startReaper(t *testing.T, script string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	if len(reaperCode) == 0 {
		t.Skipf("no reaper on %s", runtime.GOARCH)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), reaperHelperEnv+"="+script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the app is killed with it
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The reaper waits in rt_sigtimedwait (128) for the signals it blocked.
		sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", cmd.Process.Pid))
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		if strings.Contains(exe, "memfd:"+Arg0) && strings.HasPrefix(string(sc), "128 ") {
			return cmd, &out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reaper did not take over: exe %q, syscall %q\noutput: %s", exe, sc, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err == nil {
			return 0
		}
		if !errors.As(err, &ee) || ee.ExitCode() < 0 {
			t.Fatalf("reaper: %v, want an exit status\n%s", err, out.String())
		}
		return ee.ExitCode()
	case <-time.After(10 * time.Second):
		t.Fatalf("the reaper did not exit\n%s", out.String())
		return -1
	}
}

// TestReaperPassesOnTheAppsExit: the reaper exits with the app's exit status.
func TestReaperPassesOnTheAppsExit(t *testing.T) {
	t.Parallel()
	cmd, out := startReaper(t, "sleep 1; exit 7")
	if got := waitExit(t, cmd, out); got != 7 {
		t.Errorf("reaper exit status %d, want the app's 7\n%s", got, out.String())
	}
}

// TestReaperPassesSignalsOn: SIGTERM and SIGHUP sent to the reaper end an app that has no
// handler, and the reaper exits with 128+signal as a shell reports it; SIGUSR1 reaches an
// app that traps it.
func TestReaperPassesSignalsOn(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd, out := startReaper(t, "exec sleep 100")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if got := waitExit(t, cmd, out); got != 128+int(sig) {
				t.Errorf("reaper exit status %d after %v, want %d\n%s", got, sig, 128+int(sig), out.String())
			}
		})
	}
	t.Run("USR1 trapped", func(t *testing.T) {
		t.Parallel()
		cmd, out := startReaper(t, "trap 'exit 42' USR1; while :; do sleep 0.05; done")
		time.Sleep(100 * time.Millisecond) // the trap is set
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if got := waitExit(t, cmd, out); got != 42 {
			t.Errorf("reaper exit status %d, want 42 from the app's USR1 trap\n%s", got, out.String())
		}
	})
}

// TestReaperELFIsSmall: the reaper is a few hundred bytes and an idle one costs a few
// pages (no runtime, no heap).
func TestReaperELFIsSmall(t *testing.T) {
	t.Parallel()
	if n := len(reaperELF()); len(reaperCode) > 0 && n > 1024 {
		t.Errorf("reaper ELF %d bytes, want under 1 KiB", n)
	}
	cmd, _ := startReaper(t, "exec sleep 100")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil || kb > 64 {
				t.Errorf("idle reaper Rss %q, want at most 64 kB", v)
			}
			return
		}
	}
	t.Fatalf("no Rss in smaps_rollup:\n%s", b)
}

// TestReaperCodeMatchesSource assembles testdata/reaper_amd64.s (when binutils are
// installed) and compares it with reaperCode, so the bytes are what the source says.
func TestReaperCodeMatchesSource(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the source is amd64's")
	}
	as, err1 := exec.LookPath("as")
	objcopy, err2 := exec.LookPath("objcopy")
	if err1 != nil || err2 != nil {
		t.Skip("binutils (as, objcopy) not installed")
	}
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "r.o"), filepath.Join(dir, "r.bin")
	if out, err := exec.Command(as, "-o", obj, "testdata/reaper_amd64.s").CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(objcopy, "-O", "binary", "-j", ".text", obj, bin).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reaperCode, want) {
		t.Errorf("reaperCode differs from testdata/reaper_amd64.s assembled:\n got %x\nwant %x", reaperCode, want)
	}
}
