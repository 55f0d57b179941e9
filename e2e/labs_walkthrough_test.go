package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios"
)

// walkthroughParallel bounds how many labs walk at once: each is a whole mesh.
const walkthroughParallel = 3

// TestLabsWalkthrough walks every shipped lab as an attendee does, with `meshlab lab
// start` and the CLI only: on every step, `lab check` fails before the attendee's task is
// done (so the setup did not do it, and the check sends its own fresh traffic), the
// commands the step shows run as shown (the YAML it shows piped to `meshlab apply -f -`),
// and `lab check` then passes, without `lab solve`. The last `lab next` says the lab is
// done and how to stop it.
func TestLabsWalkthrough(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	sem := make(chan struct{}, walkthroughParallel)
	start := time.Now()
	t.Cleanup(func() { t.Logf("walked the labs in %v", time.Since(start).Round(time.Millisecond)) })
	for _, n := range scenarios.LabNames() {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			walkLab(t, n)
		})
	}
}

func walkLab(t *testing.T, labName string) {
	t.Helper()
	start := time.Now()
	name := testutil.UniqueName(t)
	startLabGuide(t, name, labName, "")
	path := attendeePath(t, name)
	// guide runs `meshlab lab VERB -o json` and decodes its answer (stdout); the text
	// it returns has stderr too.
	guide := func(out any, verb string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, meshlabBin(t), "lab", verb, "--name", name, "-o", "json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if jerr := json.Unmarshal(stdout, out); jerr != nil {
			t.Fatalf("lab %s: %v (%v)\n%s%s", verb, jerr, err, stdout, stderr.String())
		}
		return string(stdout) + stderr.String(), err
	}
	var st api.GuideState
	if _, err := guide(&st, "show"); err != nil {
		t.Fatalf("lab show: %v", err)
	}
	for {
		stepStart := time.Now()
		t.Logf("step %d of %d: %s", st.Step, st.Steps, st.StepName)
		if strings.TrimSpace(st.Instructions) == "" || len(st.Tasks) == 0 {
			t.Fatalf("step %d (%s) shows no instructions or no command to run: %+v", st.Step, st.StepName, st)
		}
		for _, task := range st.Tasks {
			if task.Stdin != "" && !strings.Contains(st.Instructions, task.Stdin) {
				t.Errorf("step %d: the instructions do not show the YAML to apply:\n%s", st.Step, task.Stdin)
			}
			if !strings.Contains(st.Instructions, task.Command) {
				t.Errorf("step %d: the instructions do not show the command %q", st.Step, task.Command)
			}
		}

		var before api.GuideCheck
		text, err := guide(&before, "check")
		if err == nil || before.Passed {
			t.Fatalf("step %d (%s): check passed before the attendee did anything: the setup did the task, or the check sees no change\n%s", st.Step, st.StepName, text)
		}
		for _, r := range before.Results {
			if !r.Passed && (r.Saw == "" || r.Want == "" || r.Hint == "") {
				t.Errorf("step %d: failed check %s does not say what it saw, wanted and a hint: %+v", st.Step, r.Check, r)
			}
		}

		for _, task := range st.Tasks {
			runTask(t, path, task)
		}

		var after api.GuideCheck
		if text, err := guide(&after, "check"); err != nil || !after.Passed {
			t.Fatalf("step %d (%s): check failed after the attendee ran the step's commands: %v\n%s", st.Step, st.StepName, err, text)
		}
		t.Logf("step %d: check failed before the task and passed after it; %v", st.Step, time.Since(stepStart).Round(time.Millisecond))
		if st.Step == st.Steps {
			if !after.Done {
				t.Errorf("the last step passed but the check does not say the lab is done: %+v", after)
			}
			out, err := meshlab(t, "lab", "next", "--name", name)
			if err != nil || !strings.Contains(out, "Lab "+labName+" done") || !strings.Contains(out, "meshlab down --name "+name) {
				t.Errorf("lab next after the last step: %v\n%s\nwant it to say the lab is done and how to stop it", err, out)
			}
			break
		}
		var next api.GuideState
		if _, err := guide(&next, "next"); err != nil || next.Step != st.Step+1 {
			t.Fatalf("lab next from step %d: %v, now on step %d", st.Step, err, next.Step)
		}
		st = next
	}
	t.Logf("lab %s: %d steps walked in %v", labName, st.Steps, time.Since(start).Round(time.Millisecond))
}

// attendeePath returns a PATH whose `meshlab` is the binary under test on lab name, so
// that a step's commands run exactly as shown.
func attendeePath(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec %s --name %s \"$@\"\n", meshlabBin(t), name)
	if err := os.WriteFile(filepath.Join(dir, "meshlab"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// runTask runs one of a step's commands in a shell, its YAML on stdin, as a person
// pasting it would.
func runTask(t *testing.T, path string, task api.GuideTask) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", task.Command)
	cmd.Env = append(os.Environ(), "PATH="+path)
	cmd.Stdin = strings.NewReader(task.Stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", task.Command, err, out)
	}
	t.Logf("$ %s\n%s", task.Command, strings.TrimSpace(string(out)))
}
