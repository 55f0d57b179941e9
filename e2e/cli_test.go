package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
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
	t.Parallel()
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
			{[]string{"delete", "svc", "bogus"}, []string{"backend", "frontend"}},
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
			{[]string{"get", ""}, []string{"vs", "svc", "all"}},
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
