package netns

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestPodMountNamespace: the pods' mount namespace has no named network namespace, not
// those bound before it was made nor those bound after (nothing propagates into it), and
// a mount made in it does not reach the caller's.
func TestPodMountNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testNames(t)
	before := prefix + "before"
	if err := Create(before); err != nil {
		t.Fatal(err)
	}
	fd, err := podMountNamespace()
	if err != nil {
		t.Fatal(err)
	}
	after := prefix + "after"
	if err := Create(after); err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{before, after} {
		if !strings.Contains(string(host), " "+Path(n)+" ") {
			t.Fatalf("the caller's mount table lacks %s:\n%s", Path(n), lastLines(string(host)))
		}
	}
	inside := mountTableIn(t, fd)
	for _, line := range strings.Split(inside, "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == RunDir || strings.HasPrefix(f[4], RunDir+"/")) {
			t.Errorf("the pods' mount namespace has %s mounted: %s", f[4], line)
		}
	}
	if again, err := podMountNamespace(); err != nil || again != fd {
		t.Errorf("podMountNamespace again = %d, %v; want the same %d", again, err, fd)
	}
}

// mountTableIn is the mount table of the mount namespace fd, read from a thread that
// enters it and is then discarded.
func mountTableIn(t *testing.T, fd int) string {
	t.Helper()
	type read struct {
		table string
		err   error
	}
	done := make(chan read, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- read{err: err}
			return
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			done <- read{err: err}
			return
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/mountinfo", unix.Getpid(), unix.Gettid()))
		done <- read{string(b), err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.table
}

func lastLines(s string) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-5):], "\n")
}
