package netns

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestStartSandboxed runs a shell as a sandboxed app and reads what it sees: its uid, no
// capabilities, no_new_privs, seccomp, only its own PID namespace, the pod's resolv.conf,
// hosts and hostname, and a hidden directory empty.
func TestStartSandboxed(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	prefix := testNames(t)
	ns := prefix + "sb"
	if err := Create(ns); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} { // the app's uid must reach the hidden directory
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	resolv, hosts, hidden := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hosts"), filepath.Join(dir, "hidden")
	for p, s := range map[string]string{resolv: "search ns1.svc.cluster.local\nnameserver 10.96.0.10\n", hosts: "10.244.0.9\tpod-a\n"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(hidden, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := Sandbox{UID: 1879113729, GID: 1879113729, Hostname: "pod-a", ResolvConf: resolv, Hosts: hosts, Hide: []string{hidden}}
	script := `grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo "pids: $(ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ')"
echo "hostname: $(cat /proc/sys/kernel/hostname)"
echo "resolv: $(cat /etc/resolv.conf | tr '\n' ';')"
echo "hosts: $(cat /etc/hosts | tr '\n' ';')"
echo "hidden: $(ls -A ` + hidden + ` | tr '\n' ' ')."
echo hi > /etc/hosts 2>/dev/null && echo "hosts writable"
exit 3`
	cmd := exec.Command("/bin/sh", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := StartSandboxed(ns, cmd, sb); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("sandboxed app: %v, want exit status 3 (passed on by the init)\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("sandboxed app did not exit\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"Uid:\t1879113729\t1879113729\t1879113729\t1879113729",
		"Gid:\t1879113729\t1879113729\t1879113729\t1879113729",
		"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
		"hostname: pod-a",
		"resolv: search ns1.svc.cluster.local;nameserver 10.96.0.10;",
		"hosts: 10.244.0.9\tpod-a;",
		"hidden: .",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sandboxed app output lacks %q:\n%s", want, got)
		}
	}
	if !regexp.MustCompile(`(?m)^Groups:\s*$`).MatchString(got) {
		t.Errorf("the app has supplementary groups:\n%s", got)
	}
	if strings.Contains(got, "hosts writable") {
		t.Errorf("the app could write /etc/hosts:\n%s", got)
	}
	// The app's PID namespace holds the init (1) and the shell and its children only.
	for _, line := range strings.Split(got, "\n") {
		if p, ok := strings.CutPrefix(line, "pids: "); ok {
			if f := strings.Fields(p); len(f) == 0 || f[0] != "1" || len(f) > 6 {
				t.Errorf("the app sees pids %v, want its own namespace's (1 and a few)", f)
			}
		}
	}
}

func TestSandboxValidate(t *testing.T) {
	for _, tt := range []struct {
		sb   Sandbox
		want string
	}{
		{Sandbox{GID: 5}, "uid: must not be 0"},
		{Sandbox{UID: 5}, "gid: must not be 0"},
		{Sandbox{UID: 5, GID: 5, Hide: []string{"/"}}, `hide "/"`},
		{Sandbox{UID: 5, GID: 5, Hide: []string{"run"}}, `hide "run"`},
		{Sandbox{UID: 5, GID: 5, Hosts: "etc/hosts"}, `hosts "etc/hosts": must be an absolute path`},
	} {
		if err := tt.sb.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.sb, err, tt.want)
		}
	}
	if err := (Sandbox{UID: 5, GID: 5, Hide: []string{"/run/x"}}).Validate(); err != nil {
		t.Errorf("valid sandbox: %v", err)
	}
}

// TestSandboxInitIsTheReaper: once the app runs, the pod's init is the reaper (a memfd
// ELF, not a Go process) that keeps a few pages, keeps the argv `meshlab exec` finds the
// sandbox by, reaps orphans re-parented to it, and passes SIGTERM on to the app, exiting
// with 128+15.
func TestSandboxInitIsTheReaper(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skipf("no reaper on %s: the Go init stays", runtime.GOARCH)
	}
	ns := testNames(t) + "rp"
	if err := Create(ns); err != nil {
		t.Fatal(err)
	}
	sb := Sandbox{UID: 1879113730, GID: 1879113730, Hostname: "pod-r"}
	// The subshell's sleep is orphaned at once: the init must reap it when it exits.
	cmd := exec.Command("/bin/sh", "-c", "(sleep 0.2 &); exec sleep 1000")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := StartSandboxed(ns, cmd, sb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	init := cmd.Process.Pid
	// execve switches /proc/<pid>/exe before it lays out the new argv, so for a moment the
	// exe is the memfd while cmdline is empty: wait for both.
	var (
		exe     string
		pid     int
		got     Sandbox
		ok      bool
		initErr error
	)
	deadline := time.Now().Add(10 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", init))
		if !strings.Contains(exe, "memfd:meshlab-pod-init") {
			continue
		}
		if pid, got, ok, initErr = PodInit(ns); ok || initErr != nil {
			break
		}
	}
	if !strings.Contains(exe, "memfd:meshlab-pod-init") {
		t.Fatalf("the pod's init is %q, want the reaper's memfd\n%s", exe, out.String())
	}
	err := initErr
	if err != nil || !ok || pid != init || got.Hostname != "pod-r" {
		t.Errorf("PodInit(%s) = %d %+v %v %v, want the init %d and its sandbox", ns, pid, got, ok, err, init)
	}
	time.Sleep(600 * time.Millisecond) // the orphan's sleep has exited
	pids, err := PIDsIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			t.Errorf("process %d in the pod is a zombie: the init does not reap: %s", p, st)
		}
	}
	if len(pids) != 2 {
		t.Errorf("pod processes %v, want the init and the app", pids)
	}
	roll, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", init))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^Pss:\s+(\d+) kB`).FindSubmatch(roll); m == nil {
		t.Errorf("no Pss in smaps_rollup of %d:\n%s", init, roll)
	} else if kb, _ := strconv.Atoi(string(m[1])); kb > 64 {
		t.Errorf("the pod's idle init has Pss %d kB, want at most 64", kb)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+15 {
			t.Errorf("after SIGTERM the init exited with %v, want status 143 (the app ended by the SIGTERM passed on)\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("SIGTERM to the init did not end the app\n%s", out.String())
	}
}
