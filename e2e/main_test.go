// Package e2e runs the meshlab binary as a user would: real namespaces, real iptables,
// real sidecars, and asserts that nothing is left behind.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// meshlabBin builds the binary once, in a directory the app uid can enter (apps run as an
// unprivileged uid and must be able to execute it), with meshlab-app beside it, as make
// builds them. MESHLAB_E2E_BIN names a prebuilt binary instead (it must sit where the app
// uid can execute it; a meshlab-app beside it is used): benchmarks compare two builds side
// by side with one test binary.
func meshlabBin(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("MESHLAB_E2E_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "meshlab-e2e-")
		if buildErr != nil {
			return
		}
		if buildErr = os.Chmod(binDir, 0o755); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "meshlab")
		// Static, as make builds them (CGO_ENABLED=0): a cgo build's app cannot become its
		// pod's init (podinit's InProcess) and starts one more process per pod.
		goBuild := func(args ...string) *exec.Cmd {
			cmd := exec.Command("go", append([]string{"build"}, args...)...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			return cmd
		}
		out, err := goBuild("-o", binPath, "../cmd/meshlab").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		// The small app binary beside it, as make builds both: the lab runs pods' apps
		// with it (lab.SmallAppName).
		out, err = goBuild("-o", filepath.Join(binDir, lab.SmallAppName), "../cmd/meshlab-app").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build meshlab-app: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binPath
}

// runningLab is a `meshlab up` process.
type runningLab struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	// exited is closed when the process has exited; err is its exit status then.
	exited chan struct{}
	err    error
}

// syncBuffer is the shared test helper's.
type syncBuffer = testutil.SyncBuffer

// startLab runs `meshlab up` for a unique lab and waits until it says it is up. Cleanup
// stops it and removes anything left, even when the test fails.
func startLab(tb testing.TB, args ...string) *runningLab {
	tb.Helper()
	return startLabWithin(tb, 90*time.Second, args...)
}

// startLabWithin is startLab waiting at most wait for the lab to be up: a large lab's
// `up` waits for its pods for longer (lab.ReadyTimeoutFor).
func startLabWithin(tb testing.TB, wait time.Duration, args ...string) *runningLab {
	tb.Helper()
	bin := meshlabBin(tb)
	name := testutil.UniqueName(tb)
	all := append([]string{"up", "--name", name, "--drain-duration", "0", "--log-level", "info"}, args...)
	cmd := exec.Command(bin, all...)
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	cmd.Stdout = io.MultiWriter(out, pw)
	cmd.Stderr = out
	l := &runningLab{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	if err := startOwned(cmd, func(err error) { l.err = err; pw.Close(); close(l.exited) }); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		select {
		case <-l.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-l.exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-l.exited
			}
		}
		_ = exec.Command(bin, "clean", "--force", "--name", name).Run()
		if tb.Failed() {
			tb.Logf("meshlab up output:\n%s", out.String())
		}
	})
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "lab "+name+" is up") {
				close(up)
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case <-up:
	case <-l.exited:
		tb.Fatalf("meshlab up exited before the lab was up: %v\n%s", l.err, out.String())
	case <-time.After(wait):
		tb.Fatalf("lab not up after %s:\n%s", wait, out.String())
	}
	return l
}

// startOwned starts cmd so that it is told to stop (SIGTERM) when the test process dies
// without running its cleanups (go test's -timeout panics, a kill): the lab then goes
// down in order rather than outliving its test. The parent-death signal is sent when the
// thread that forked cmd ends, not the process, so one goroutine locked to its thread
// starts and waits for cmd, and exited is called with Wait's result.
func startOwned(cmd *exec.Cmd, exited func(error)) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}

// meshlabCommandLimit bounds one meshlab command of a test: a ceiling for a command
// that hangs, not a timing target. It is generous because e2e tests run in parallel on
// a machine CI may share: a docs page's loop of 100 requests through a waypoint in one
// `exec` took 37 s alone at load 24 and passed 60 s beside another lab.
const meshlabCommandLimit = 3 * time.Minute

// meshlab runs the binary and returns its combined output.
func meshlab(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), meshlabCommandLimit)
	defer cancel()
	out, err := exec.CommandContext(ctx, meshlabBin(tb), args...).CombinedOutput()
	return string(out), err
}

// assertNothingLeft checks that lab name left no namespace, run directory or process.
func assertNothingLeft(tb testing.TB, name string) {
	tb.Helper()
	nss, err := netns.List("ml-" + name + "-")
	if err != nil {
		tb.Fatal(err)
	}
	if len(nss) > 0 {
		tb.Errorf("namespaces left behind: %v", nss)
	}
	dir := lab.PathsFor(lab.DefaultRunRoot, name).Dir
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		tb.Errorf("run directory %s left behind (stat: %v)", dir, err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.Contains(string(b), dir+"/") || strings.Contains(string(b), "ml-"+name+"-") {
			tb.Errorf("process left behind: %s: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}
