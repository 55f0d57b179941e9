package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"golang.org/x/sys/unix"
)

// helperExecEnv makes the test binary act as `meshlab exec`: Exec into the namespace it names.
const helperExecEnv = "MESHLAB_NETNS_TEST_EXEC"

func TestStartAndPIDsIn(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testNames(t) + "pids"
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	pids, err := PIDsIn(name)
	if err != nil || len(pids) != 0 {
		t.Fatalf("PIDsIn(fresh namespace) = %v, %v; want none", pids, err)
	}

	cmd := exec.Command("sleep", "60")
	if err := Start(name, cmd); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid

	var want, got, self unix.Stat_t
	if err := unix.Stat(Path(name), &want); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &got); err != nil {
		t.Fatal(err)
	}
	if got.Ino != want.Ino {
		t.Fatalf("started process is in netns inode %d, want %d", got.Ino, want.Ino)
	}
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		t.Fatal(err)
	}
	if self.Ino == want.Ino {
		t.Fatal("the test process itself ended up in the namespace")
	}

	pids, err = PIDsIn(name)
	if err != nil {
		t.Fatalf("PIDsIn: %v", err)
	}
	if !slices.Equal(pids, []int{pid}) {
		t.Fatalf("PIDsIn = %v, want [%d]", pids, pid)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	eventually(t, "the killed process to leave PIDsIn", func() bool {
		pids, err := PIDsIn(name)
		return err == nil && len(pids) == 0
	})
}

func TestStartFailureIsReported(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testNames(t) + "bad"
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	err := Start(name, exec.Command("/nonexistent/meshlab-test-binary"))
	if err == nil || !strings.Contains(err.Error(), "start /nonexistent/meshlab-test-binary") {
		t.Fatalf("Start of a missing binary = %v, want a start error", err)
	}
}

func TestExec(t *testing.T) {
	if name := os.Getenv(helperExecEnv); name != "" {
		// Running as the helper process: become readlink inside the namespace.
		err := Exec(name, []string{"readlink", "/proc/self/ns/net"}, os.Environ())
		fmt.Fprintf(os.Stderr, "Exec returned: %v\n", err)
		os.Exit(3)
	}
	testutil.RequireRoot(t)
	t.Parallel()
	name := testNames(t) + "exec"
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestExec$")
	cmd.Env = append(os.Environ(), helperExecEnv+"="+name)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var want unix.Stat_t
	if err := unix.Stat(Path(name), &want); err != nil {
		t.Fatal(err)
	}
	if got, exp := strings.TrimSpace(string(out)), fmt.Sprintf("net:[%d]", want.Ino); got != exp {
		t.Fatalf("exec'd process saw %q, want %q", got, exp)
	}
	if err := Exec(name, nil, nil); err == nil {
		t.Fatal("Exec with an empty argv succeeded")
	}
}

// TestRun runs a command in a namespace as meshlab exec does: a direct child of the
// caller (no second process between them), inside the namespace, with its exit code
// returned as an *exec.ExitError and what prepare set (its stdout, Pdeathsig) in force.
func TestRun(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testNames(t) + "run"
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var pid int
	prepare := func(c *exec.Cmd) {
		c.Stdout = &out
		c.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	}
	err := Run(name, []string{"sh", "-c", "readlink /proc/self/ns/net; echo $PPID; exit 7"}, os.Environ(), true, prepare, func(p *os.Process) { pid = p.Pid })
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("Run = %v, want exit code 7", err)
	}
	var want unix.Stat_t
	if err := unix.Stat(Path(name), &want); err != nil {
		t.Fatal(err)
	}
	if exp := fmt.Sprintf("net:[%d]\n%d\n", want.Ino, os.Getpid()); out.String() != exp || pid == 0 {
		t.Fatalf("the command printed %q (started as pid %d), want %q: in the namespace, a child of this process", out.String(), pid, exp)
	}
	if err := Run(name, []string{"/nonexistent/meshlab-test-binary"}, nil, true, prepare, func(*os.Process) {}); err == nil || errors.As(err, &ee) {
		t.Fatalf("Run of a missing binary = %v, want an error saying it did not start", err)
	}
	if err := Run(name, nil, nil, true, prepare, func(*os.Process) {}); err == nil {
		t.Fatal("Run with an empty argv succeeded")
	}
}
