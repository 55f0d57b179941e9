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

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestCLIConsistency checks, against one hello lab, that every verb that prints data
// takes -o json and -o yaml, that every verb taking a name refuses a bogus one with the
// valid names, and that `meshlab __complete` offers the lab's names.
func TestCLIConsistency(t *testing.T) {
	testutil.RequireRoot(t)
	// Not parallel (tparallel): its subtests share the test's lab and run one after another.
	l := startLab(t)
	bin := meshlabBin(t)
	run := func(args ...string) (stdout, stderr string, err error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--name", l.name}, args...)...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}

	t.Run("output", func(t *testing.T) {
		for _, args := range [][]string{
			{"status"}, {"proxy-status"}, {"describe", "pod", "frontend-v1"},
			{"describe", "service", "backend"}, {"history", "frontend-v1"}, {"fault", "list"},
			{"ca", "status"}, {"lab", "list"}, {"get", "svc", "backend"},
			{"proxy-config", "clusters", "frontend-v1"},
		} {
			for _, format := range []string{"json", "yaml"} {
				out, errOut, err := run(append(args, "-o", format)...)
				if err != nil {
					t.Errorf("%v -o %s: %v\n%s%s", args, format, err, out, errOut)
					continue
				}
				var v any
				if format == "json" {
					err = json.Unmarshal([]byte(out), &v)
				} else {
					err = yaml.Unmarshal([]byte(out), &v)
				}
				if err != nil || v == nil {
					t.Errorf("%v -o %s: not %s (%v):\n%s", args, format, format, err, out)
				}
			}
		}
	})

	// Verbs that change the lab print typed results with -o: objects safe to apply and
	// delete in the hello lab, a harmless CA clock offset, a root rotation.
	t.Run("action output", func(t *testing.T) {
		dr := filepath.Join(t.TempDir(), "dr.yaml")
		if err := os.WriteFile(dr, []byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: cli-output, namespace: default}\nspec: {host: backend}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		changes := func(format string, args ...string) string {
			t.Helper()
			var got []struct{ Kind, Namespace, Name, Action string }
			runParsed(t, run, format, &got, args...)
			if len(got) != 1 || got[0].Kind != "DestinationRule" || got[0].Namespace != "default" || got[0].Name != "cli-output" {
				t.Errorf("%v -o %s: %+v; want one change of DestinationRule default/cli-output", args, format, got)
				return ""
			}
			return got[0].Action
		}
		for _, c := range []struct {
			format string
			args   []string
			want   string
		}{
			{"json", []string{"apply", "-f", dr}, "created"},
			{"yaml", []string{"apply", "-f", dr}, "unchanged"},
			{"json", []string{"delete", "-f", dr}, "deleted"},
			{"json", []string{"apply", "-f", dr}, "created"},
			{"yaml", []string{"delete", "DestinationRule", "cli-output"}, "deleted"},
		} {
			if got := changes(c.format, c.args...); got != c.want {
				t.Errorf("%v -o %s: action %q, want %q", c.args, c.format, got, c.want)
			}
		}
		if out, _, err := run("apply", "-f", dr); err != nil || out != "destinationrule.networking.istio.io/cli-output created\n" {
			t.Errorf("apply text: %v %q", err, out)
		}
		if out, _, err := run("delete", "-f", dr); err != nil || out != "destinationrule.networking.istio.io \"cli-output\" deleted\n" {
			t.Errorf("delete text: %v %q", err, out)
		}

		var clock struct {
			Offset  string
			Renewed bool
			Status  struct{ ClockOffset string }
		}
		runParsed(t, run, "json", &clock, "ca", "clock", "--offset", "-1m", "--no-renew")
		if clock.Offset != "-1m0s" || clock.Renewed || clock.Status.ClockOffset != "-1m0s" {
			t.Errorf("ca clock -o json: %+v", clock)
		}
		runParsed(t, run, "yaml", &clock, "ca", "clock", "--reset", "--no-renew")
		if clock.Offset != "0s" {
			t.Errorf("ca clock --reset -o yaml: %+v", clock)
		}

		for _, format := range []string{"json", "yaml"} {
			var added struct{ ID, Kind string }
			runParsed(t, run, format, &added, "fault", "ca-clock", "--offset", "-1m")
			if added.ID == "" || added.Kind != "ca-clock" {
				t.Errorf("fault ca-clock -o %s: %+v", format, added)
			}
			var cleared []struct{ ID string }
			runParsed(t, run, format, &cleared, "fault", "clear")
			if len(cleared) != 1 || cleared[0].ID != added.ID {
				t.Errorf("fault clear -o %s: %+v; want fault %s", format, cleared, added.ID)
			}
		}
		var none []any
		if runParsed(t, run, "json", &none, "fault", "clear"); none == nil || len(none) != 0 {
			t.Errorf("fault clear -o json with no fault: %v; want []", none)
		}

		for _, format := range []string{"json", "yaml"} {
			var rot struct {
				Root        string
				PodsRenewed int
				Status      struct{ Signing struct{ Serial string } }
			}
			runParsed(t, run, format, &rot, "ca", "rotate-root")
			if rot.Root == "" || rot.Root != rot.Status.Signing.Serial || rot.PodsRenewed != 3 {
				t.Errorf("ca rotate-root -o %s: %+v", format, rot)
			}
		}
	})

	t.Run("bogus names", func(t *testing.T) {
		pods := []string{"backend-v1", "backend-v2", "frontend-v1"}
		kinds := []string{"VirtualService", "Service", "DestinationRule"}
		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"describe", "pod", "bogus"}, pods},
			{[]string{"describe", "service", "bogus"}, []string{"backend", "frontend"}},
			{[]string{"get", "svc", "bogus"}, []string{"backend", "frontend"}},
			{[]string{"get", "bogus"}, kinds},
			// delete says what kubectl says of a missing object (issue 28), names nothing else
			{[]string{"delete", "svc", "bogus"}, []string{`Error from server (NotFound): services "bogus" not found`}},
			{[]string{"delete", "bogus", "x"}, kinds},
			{[]string{"exec", "bogus", "--", "true"}, pods},
			{[]string{"logs", "bogus"}, pods},
			{[]string{"history", "bogus"}, pods},
			{[]string{"diff", "bogus", "v1", "v2"}, pods},
			{[]string{"trace", "bogus", "http://backend:8080/"}, pods},
			{[]string{"proxy-config", "clusters", "bogus"}, pods},
			{[]string{"proxy-config", "bogus", "frontend-v1"}, []string{"clusters", "listeners", "routes"}},
			{[]string{"proxy", "restart", "bogus"}, pods},
			{[]string{"ca", "renewal", "bogus", "--pause"}, pods},
			{[]string{"fault", "add", "bogus"}, []string{"delay-push", "hold-push", "nack"}},
			{[]string{"fault", "add", "hold-push", "bogus"}, pods},
			{[]string{"lab", "run", "bogus"}, []string{"hello", "retries"}},
			{[]string{"up", "bogus"}, []string{"hello"}},
		} {
			out, errOut, err := run(c.args...)
			if err == nil {
				t.Errorf("%v: exit 0, want an error\n%s", c.args, out)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%v: error does not list %q:\n%s", c.args, w, errOut)
				}
			}
		}
	})

	t.Run("completion", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"describe", "pod", ""}, []string{"backend-v1", "backend-v2", "frontend-v1"}},
			{[]string{"proxy", "restart", ""}, []string{"backend-v1", "frontend-v1"}},
			{[]string{"get", ""}, []string{"vs", "svc", "gw", "gtw", "deploy", "cm", "pods", "all"}}, // the lab's discovery
			{[]string{"get", "svc", ""}, []string{"backend", "frontend"}},
			{[]string{"fault", "add", ""}, []string{"hold-push", "kill-proxy"}},
			{[]string{"fault", "add", "hold-push", ""}, []string{"backend-v1", "frontend-v1"}},
			{[]string{"proxy-config", ""}, []string{"clusters", "listeners"}},
			{[]string{"lab", "run", ""}, []string{"hello", "retries"}},
			{[]string{"status", "-o", ""}, []string{"json", "yaml"}},
			{[]string{"status", "--name", ""}, []string{l.name}},
		} {
			out, _, err := run(append([]string{"__complete"}, c.args...)...)
			checkCandidates(t, c.args, out, err, c.want)
		}
	})
}

// runParsed runs a verb with -o format and decodes its output into v.
func runParsed(t *testing.T, run func(...string) (string, string, error), format string, v any, args ...string) {
	t.Helper()
	out, errOut, err := run(append(args, "-o", format)...)
	if err != nil {
		t.Errorf("%v -o %s: %v\n%s%s", args, format, err, out, errOut)
		return
	}
	if format == "json" {
		err = json.Unmarshal([]byte(out), v)
	} else {
		err = yaml.Unmarshal([]byte(out), v)
	}
	if err != nil {
		t.Errorf("%v -o %s: not %s (%v):\n%s", args, format, format, err, out)
	}
}

// TestLabGuideOutput drives a started three-step lab with lab check, next and solve in
// -o json and -o yaml.
func TestLabGuideOutput(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	bin := meshlabBin(t)
	name := testutil.UniqueName(t)
	labFile := filepath.Join(t.TempDir(), "three.yaml")
	step := "    - name: step %d\n      instructions: nothing to do\n      solution:\n        - wait: {duration: 10ms}\n      checks:\n        - proxy-synced: {pod: frontend-v1}\n"
	spec := "apiVersion: meshlab.dev/v1alpha1\nkind: Lab\nmetadata: {name: three}\nspec:\n  title: Three steps\n  scenario: hello\n  introduction: three steps\n  steps:\n" +
		fmt.Sprintf(step, 1) + fmt.Sprintf(step, 2) + fmt.Sprintf(step, 3)
	if err := os.WriteFile(labFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	startLabGuide(t, name, labFile, "")
	run := func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, bin, append([]string{"--name", name}, args...)...)
		var o, e strings.Builder
		c.Stdout, c.Stderr = &o, &e
		err := c.Run()
		return o.String(), e.String(), err
	}
	type check struct {
		Step    int
		Passed  bool
		Results []struct {
			Check  string
			Passed bool
		}
	}
	wantCheck := func(verb, format string, step int) {
		t.Helper()
		var c check
		runParsed(t, run, format, &c, "lab", verb)
		if c.Step != step || !c.Passed || len(c.Results) != 1 || !c.Results[0].Passed || c.Results[0].Check == "" {
			t.Errorf("lab %s -o %s: %+v; want step %d passed with one passing result", verb, format, c, step)
		}
	}
	wantNext := func(format string, step int) {
		t.Helper()
		var st struct {
			Step     int
			Steps    int
			StepName string
		}
		runParsed(t, run, format, &st, "lab", "next")
		if st.Step != step || st.Steps != 3 || st.StepName != fmt.Sprintf("step %d", step) {
			t.Errorf("lab next -o %s: %+v; want step %d of 3", format, st, step)
		}
	}
	wantCheck("check", "json", 1)
	wantCheck("check", "yaml", 1)
	wantNext("json", 2)
	wantCheck("solve", "json", 2)
	wantNext("yaml", 3)
	wantCheck("solve", "yaml", 3)
	if o, _, err := run("lab", "check"); err != nil || !strings.HasPrefix(o, "PASS ") || !strings.Contains(o, "Step 3 passed.\n") || !strings.Contains(o, "Lab three done: 3 of 3 steps passed") {
		t.Errorf("lab check text: %v %q", err, o)
	}
}

// checkCandidates checks that `__complete` output lists every wanted candidate.
func checkCandidates(t *testing.T, args []string, out string, err error, want []string) {
	t.Helper()
	if err != nil {
		t.Errorf("__complete %v: %v\n%s", args, err, out)
		return
	}
	got := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		got[strings.SplitN(line, "\t", 2)[0]] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("__complete %v: no %q in:\n%s", args, w, out)
		}
	}
}
