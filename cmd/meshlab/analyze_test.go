package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/analyze"
)

// runRoot runs the meshlab command line in process and returns its stdout and error.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func TestAnalyzeExitCodes(t *testing.T) {
	dir := filepath.Join("..", "..", "controlplane", "analyze", "testdata")
	f := func(n string) string { return filepath.Join(dir, n) }
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int // 0: no error
		wantOut  string
	}{
		{name: "clean", args: []string{"-f", f("base.yaml"), "-f", f("clean.yaml")}, wantOut: "No validation issues found"},
		{name: "error", args: []string{"-f", f("base.yaml"), "-f", f("vs-host-not-found.yaml")}, wantCode: analyze.ExitIssues, wantOut: "Error [IST0101]"},
		{name: "warning below threshold", args: []string{"-f", f("base.yaml"), "-f", f("policy-selects-nothing.yaml")}, wantOut: "Warning [IST0127]"},
		{name: "warning at threshold", args: []string{"-f", f("base.yaml"), "-f", f("policy-selects-nothing.yaml"), "--failure-threshold", "warning"}, wantCode: analyze.ExitIssues},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runRoot(t, append([]string{"analyze"}, tc.args...)...)
			var ee *exitError
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("err = %v, want none\n%s", err, out)
			case tc.wantCode != 0 && (!errors.As(err, &ee) || ee.ExitCode() != tc.wantCode):
				t.Fatalf("err = %v, want exit code %d\n%s", err, tc.wantCode, out)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("output %q does not contain %q", out, tc.wantOut)
			}
		})
	}
}

func TestAnalyzeJSON(t *testing.T) {
	dir := filepath.Join("..", "..", "controlplane", "analyze", "testdata")
	out, _ := runRoot(t, "analyze", "-o", "json", "-f", filepath.Join(dir, "base.yaml"), "-f", filepath.Join(dir, "subset-not-found.yaml"))
	var fs []struct {
		Level, Code, File, Field, Message string
		Object                            struct{ Kind, Namespace, Name string }
	}
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(fs) != 1 || fs[0].Level != "Error" || fs[0].Code != "IST0101" || fs[0].Object.Kind != "VirtualService" ||
		fs[0].Field != "spec.http[0].route[0].destination.subset" || fs[0].File != "subset-not-found.yaml" {
		t.Errorf("findings = %+v", fs)
	}
	if _, err := runRoot(t, "analyze", "-o", "xml", "-f", filepath.Join(dir, "base.yaml")); err == nil {
		t.Error("-o xml accepted")
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := runRoot(t, "completion", sh)
		if err != nil || !strings.Contains(out, "meshlab") {
			t.Errorf("completion %s: err=%v, %d bytes", sh, err, len(out))
		}
	}
	if _, err := runRoot(t, "completion", "tcsh"); err == nil {
		t.Error("completion tcsh accepted")
	}
}

// A running lab's object applied with -n was written without metadata.namespace:
// analyze reads it with the namespace the lab stored it in, and leaves an object that
// names its own, or does not decode, as it is.
func TestAnalyzeWithNamespace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, ns, want string
	}{
		{"added", `{"kind":"Service","metadata":{"name":"httpbin"}}`, "foo", `{"kind":"Service","metadata":{"name":"httpbin","namespace":"foo"}}`},
		{"no metadata", `{"kind":"Service"}`, "foo", `{"kind":"Service","metadata":{"namespace":"foo"}}`},
		{"its own kept", `{"kind":"Service","metadata":{"name":"a","namespace":"bar"}}`, "foo", `{"kind":"Service","metadata":{"name":"a","namespace":"bar"}}`},
		{"no namespace stored", `{"kind":"Service"}`, "", `{"kind":"Service"}`},
		{"not an object", `[1]`, "foo", `[1]`},
	} {
		if got := string(withNamespace(json.RawMessage(tc.in), tc.ns)); got != tc.want {
			t.Errorf("%s: withNamespace(%s, %q) = %s, want %s", tc.name, tc.in, tc.ns, got, tc.want)
		}
	}
}
