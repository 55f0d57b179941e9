package netns

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestSandboxTmpIsThePods: a sandboxed app with a Tmp of its own sees the host's /tmp
// beneath (a file the host put there, as a test's binaries), and what it writes in /tmp
// lands in Tmp only: the host's /tmp and a second pod's /tmp do not see it.
func TestSandboxTmpIsThePods(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	prefix := testNames(t)
	host, err := os.MkdirTemp("/tmp", "meshlab-tmp-test-") // in the host's /tmp, whatever TMPDIR says
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(host) })
	if err := os.Chmod(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "from-host"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(pod, script string) (string, string) {
		t.Helper()
		ns := prefix + pod
		if err := Create(ns); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(t.TempDir(), "tmp")
		if err := os.Mkdir(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		sb := Sandbox{UID: 1879113731, GID: 1879113731, Hostname: pod, Tmp: tmp}
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
			if err != nil {
				t.Fatalf("pod %s: %v\n%s", pod, err, out.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("pod %s: the app did not exit\n%s", pod, out.String())
		}
		return out.String(), tmp
	}
	name := filepath.Base(host)
	got, tmp := run("a", `cat /tmp/`+name+`/from-host; echo mine > /tmp/`+name+`-written; stat -c '%a %u' /tmp/`+name+`-written`)
	if want := "host\n644 1879113731\n"; got != want {
		t.Errorf("pod a printed %q, want %q (the host's file read, its own written as its uid)", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(tmp, name+"-written")); err != nil || string(b) != "mine\n" {
		t.Errorf("the pod's Tmp holds %q (%v), want what it wrote in /tmp", b, err)
	}
	if _, err := os.Stat("/tmp/" + name + "-written"); !os.IsNotExist(err) {
		_ = os.Remove("/tmp/" + name + "-written")
		t.Errorf("the pod's write reached the host's /tmp (stat: %v)", err)
	}
	got, _ = run("b", `cat /tmp/`+name+`-written 2>/dev/null || echo absent`)
	if strings.TrimSpace(got) != "absent" {
		t.Errorf("pod b sees pod a's /tmp file: %q", got)
	}
}
