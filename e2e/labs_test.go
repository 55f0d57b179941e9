package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios"
	"github.com/meshlab/meshlab/scenarios/runner"
)

// runLab runs `meshlab lab run ref` as a unique lab and returns its output, whether it
// exited 0, and the JUnit suites it wrote. Cleanup removes whatever the lab left.
func runLab(t *testing.T, ref string) (string, bool, []runner.JUnitSuite) {
	t.Helper()
	bin := meshlabBin(t)
	name := testutil.UniqueName(t)
	junit := filepath.Join(t.TempDir(), "junit.xml")
	t.Cleanup(func() {
		_ = exec.Command(bin, "clean", "--force", "--name", name).Run()
		assertNothingLeft(t, name)
	})
	out, runErr := meshlab(t, "lab", "run", ref, "--name", name, "--junit", junit, "--drain-duration", "0")
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		t.Fatalf("lab run %s: %v\n%s", ref, runErr, out)
	}
	f, err := os.Open(junit)
	if err != nil {
		t.Fatalf("lab run %s wrote no junit: %v\n%s", ref, err, out)
	}
	defer f.Close()
	suites, jerr := runner.ReadJUnit(f)
	if jerr != nil {
		t.Fatal(jerr)
	}
	return out, runErr == nil, suites
}

// TestLabsRun runs every bundled lab with `meshlab lab run`: each must pass, with a
// JUnit report whose every case passed.
func TestLabsRun(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	for _, n := range scenarios.LabNames() {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			out, ok, suites := runLab(t, n)
			if !ok {
				t.Fatalf("lab %s failed:\n%s", n, out)
			}
			if len(suites) != 1 || suites[0].Name != n || suites[0].Tests == 0 || suites[0].Failures != 0 {
				t.Fatalf("junit suites %+v; want one suite %s with tests and no failures\n%s", suites, n, out)
			}
		})
	}
}

// TestLabRunBrokenFails proves the checks can fail: a copy of hello expecting the wrong
// split exits non-zero and says what it saw and expected, in its output and its JUnit.
func TestLabRunBrokenFails(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	data, _, err := scenarios.LookupLab("hello")
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(data), "want: {v1: 100}, tolerance: 0%", "want: {v1: 90, v2: 10}, tolerance: 5%", 1)
	if broken == string(data) {
		t.Fatal("hello lab no longer has the expected distribution check")
	}
	file := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok, suites := runLab(t, file)
	if ok {
		t.Fatalf("broken lab passed:\n%s", out)
	}
	if !strings.Contains(out, "FAIL distribution: saw v1 ") || !strings.Contains(out, "want v1 90%, v2 10% ±5%") {
		t.Errorf("output does not say what the distribution check saw and wanted:\n%s", out)
	}
	if len(suites) != 1 || suites[0].Failures != 1 {
		t.Fatalf("junit %+v; want exactly one failure", suites)
	}
	for _, c := range suites[0].Cases {
		if c.Failure != nil && !strings.Contains(c.Failure.Message, "want v1 90%") {
			t.Errorf("junit failure message %q does not say what was wanted", c.Failure.Message)
		}
	}
}

// TestLabGuide walks through a lab as a person would: `lab start`, then `lab show`,
// `lab check`, `lab next` and `lab solve` against the running lab's API. A check sends
// fresh traffic each time, so it fails before the step's task and passes after it.
func TestLabGuide(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testutil.UniqueName(t)
	out := startLabGuide(t, name, "retries", "")
	if !strings.Contains(out.String(), "Step 1 of 2: the flaky service fails") ||
		!strings.Contains(out.String(), "meshlab exec client -- curl") {
		t.Fatalf("lab start did not show the first step and its command:\n%s", out.String())
	}
	got, err := meshlab(t, "lab", "check", "--name", name)
	if err == nil || !strings.Contains(got, "FAIL stat: saw ") || !strings.Contains(got, "hint: ") ||
		!strings.Contains(got, "step 1 is not done yet (1 of 1 checks failed)") || strings.Contains(got, "lab failed") {
		t.Fatalf("lab check before the task: %v\n%s\nwant what it saw, a hint and what to do next", err, got)
	}
	// The attendee's task: send requests to flaky (the guide shows this loop).
	for range 20 {
		if got, err := meshlab(t, "exec", "--name", name, "client", "--", "curl", "-s", "-o", "/dev/null", "http://flaky:8080/"); err != nil {
			t.Fatalf("exec curl: %v\n%s", err, got)
		}
	}
	if got, err := meshlab(t, "lab", "check", "--name", name); err != nil || !strings.Contains(got, "Step 1 passed.") || !strings.Contains(got, "meshlab lab next") {
		t.Fatalf("lab check after the task: %v\n%s", err, got)
	}
	got, err = meshlab(t, "lab", "next", "--name", name)
	if err != nil || !strings.Contains(got, "Step 2 of 2: retries hide the failures") || !strings.Contains(got, "meshlab apply -f - <<'EOF'") ||
		!strings.Contains(got, "retryOn: 5xx") {
		t.Fatalf("lab next: %v\n%s\nwant step 2 with the YAML to apply", err, got)
	}
	if got, err := meshlab(t, "lab", "show", "--name", name); err != nil || !strings.Contains(got, "Step 2 of 2: retries hide the failures") || !strings.Contains(got, "1 of 2 steps passed") {
		t.Fatalf("lab show: %v\n%s", err, got)
	}
	// Step 2's task is not done yet: its check sends fresh traffic and sees the 503s.
	if got, err := meshlab(t, "lab", "check", "--name", name); err == nil || !strings.Contains(got, "FAIL status: saw ") || !strings.Contains(got, "want at least 85% answers 200") {
		t.Fatalf("lab check before the solution: %v\n%s", err, got)
	}
	if got, err := meshlab(t, "lab", "next", "--name", name); err == nil || !strings.Contains(got, "has not passed yet") {
		t.Fatalf("lab next on an unfinished last step: %v\n%s", err, got)
	}
	got, err = meshlab(t, "lab", "solve", "--name", name)
	if err != nil || !strings.Contains(got, "Step 2 passed.") || !strings.Contains(got, "Lab retries done: 2 of 2 steps passed") ||
		!strings.Contains(got, "meshlab down --name "+name) {
		t.Fatalf("lab solve: %v\n%s", err, got)
	}
	if got, err := meshlab(t, "lab", "next", "--name", name); err != nil || !strings.Contains(got, "Lab retries done") {
		t.Fatalf("lab next after the last step: %v\n%s", err, got)
	}
}

// startLabGuide runs `meshlab lab start REF` as lab name (the dashboard on listen, ""
// for none) and returns its output once the lab is up and its first step shown; cleanup
// stops it and checks that nothing is left.
func startLabGuide(t *testing.T, name, ref, listen string) *syncBuffer {
	t.Helper()
	bin := meshlabBin(t)
	cmd := exec.Command(bin, "lab", "start", ref, "--name", name, "--listen", listen, "--drain-duration", "0")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = exec.Command(bin, "clean", "--force", "--name", name).Run()
		assertNothingLeft(t, name)
		if t.Failed() {
			t.Logf("lab start output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "Stop with Ctrl-C") {
		select {
		case <-done:
			t.Fatalf("lab start exited:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab start not ready after 60s:\n%s", out.String())
		}
	}
	return out
}
