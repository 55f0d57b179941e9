package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// writeLab makes a run directory for lab name under root whose record says creator made
// it (nil: a record too old to say); its process is not running.
func writeLab(t *testing.T, root, name string, creator *uint32) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(lab.Record{Name: name, PID: 0, CreatorUID: creator})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lab.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func uid(n uint32) *uint32 { return &n }

func TestDefaultLab(t *testing.T) {
	const me = 1000
	for _, tc := range []struct {
		name    string
		labs    map[string]*uint32
		want    string
		wantErr string
	}{
		{name: "none", wantErr: "no lab is running"},
		{name: "the only one, mine", labs: map[string]*uint32{"a": uid(me)}, want: "a"},
		{name: "the only one of mine among others'", labs: map[string]*uint32{"a": uid(me), "b": uid(1001), "default": uid(0)}, want: "a"},
		{name: "an old record counts as mine", labs: map[string]*uint32{"old": nil, "b": uid(1001)}, want: "old"},
		{
			name: "several of mine: never one silently, not even default",
			labs: map[string]*uint32{"a": uid(me), "default": uid(me)},
			wantErr: "several labs of yours are present: a (stopped: remove it with meshlab clean --lab a), " +
				"default (stopped: remove it with meshlab clean --lab default); choose one with --lab NAME",
		},
		{
			name:    "only other users' labs",
			labs:    map[string]*uint32{"b": uid(1001)},
			wantErr: "no lab of yours is present (other labs: b (user 1001)); choose one with --lab NAME",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for n, c := range tc.labs {
				writeLab(t, root, n, c)
			}
			got, err := defaultLab(root, me)
			if tc.wantErr != "" {
				testutil.CheckErr(t, "defaultLab", err, tc.wantErr)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("defaultLab = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	root := t.TempDir()
	if _, err := defaultLab(root, me); !errors.Is(err, lab.ErrNoLab) {
		t.Errorf("no lab: %v, want lab.ErrNoLab", err)
	}
}

// TestLabFlag: --lab names the lab for every verb; --name still does (docs and tests use
// it), and the two naming different labs is refused.
func TestLabFlag(t *testing.T) {
	root := t.TempDir()
	writeLab(t, root, "a", uid(lab.CallerUID()))
	writeLab(t, root, "b", uid(lab.CallerUID()))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "vs"}, "several labs of yours are present: a (stopped"},
		{[]string{"--lab", "b", "get", "vs"}, "lab b is not running; remove what it left with: sudo meshlab clean --lab b"},
		{[]string{"get", "vs", "--lab", "b"}, "lab b is not running"},
		{[]string{"--name", "a", "get", "vs"}, "lab a is not running"},
		{[]string{"--lab", "a", "--name", "b", "get", "vs"}, "--lab a and --name b name different labs: use --lab alone"},
		{[]string{"--lab", "zz", "get", "vs"}, `zz`},
		{[]string{"--lab", "Bad_Name", "get", "vs"}, `invalid lab name "Bad_Name"`},
	} {
		_, err := runRoot(t, append([]string{"--run-root", root}, tc.args...)...)
		testutil.CheckErr(t, strings.Join(tc.args, " "), err, tc.want)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || out != "client version: "+meshlabVersion+"\n" {
		t.Errorf("version (no lab) = %q, %v", out, err)
	}
	if meshlabVersion != "1.0.0-dev" {
		t.Errorf("meshlabVersion = %q, read from the proxy's %q", meshlabVersion, "meshlab/1.0.0-dev/...")
	}
	out, err = run(t, "version", "-o", "json")
	var rep struct {
		ClientVersion struct {
			Version string `json:"version"`
		} `json:"clientVersion"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.ClientVersion.Version != meshlabVersion {
		t.Errorf("version -o json = %s, %v", out, err)
	}
	out, err = run(t, "version", "--short=false")
	if err != nil || !strings.HasPrefix(out, `client version: version.BuildInfo{Version:"`+meshlabVersion+`", GitRevision:`) {
		t.Errorf("version --short=false = %q, %v", out, err)
	}
	out, err = run(t, "version", "-o", "yaml")
	if err != nil || !strings.Contains(out, "clientVersion:\n  golang_version: go") {
		t.Errorf("version -o yaml = %q, %v", out, err)
	}
	_, err = run(t, "version", "-o", "table")
	testutil.CheckErr(t, "version -o table", err, `-o "table": want json or yaml`)

	root := t.TempDir()
	writeLab(t, root, "a", uid(lab.CallerUID()))
	writeLab(t, root, "b", uid(lab.CallerUID()))
	out, err = runRoot(t, "--run-root", root, "version")
	if !strings.HasPrefix(out, "client version: ") {
		t.Errorf("version with several labs prints no client version: %q", out)
	}
	testutil.CheckErr(t, "version with several labs", err, "several labs of yours are present")
}

// TestHelpTexts: cobra reads a backquoted word in a flag's usage as the flag's value
// name, so up --help must not carry one; proxy --help (Envoy's flags) must point at the
// lab verb behind it.
func TestHelpTexts(t *testing.T) {
	out, err := runRoot(t, "up", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "--xds-history int ") || strings.Contains(out, "--xds-history meshlab") {
		t.Errorf("up --help mangles --xds-history:\n%s", out)
	}
	if !strings.Contains(out, "--lab string") {
		t.Errorf("up --help lacks the global --lab:\n%s", out)
	}
	out, err = runRoot(t, "proxy", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "meshlab proxy restart POD") || !strings.Contains(out, "--restart-epoch") {
		t.Errorf("proxy --help:\n%.600s", out)
	}
}

func TestDownWithProgress(t *testing.T) {
	var out bytes.Buffer
	err := downWithProgress(&out, "x", 10*time.Millisecond, func() error {
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// At least one progress line between the first and the last (a loaded machine may
	// drop ticks, never all of them in ten periods).
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "stopping lab x: ") ||
		!strings.HasPrefix(lines[1], "  waiting for lab x to stop") || !strings.HasPrefix(lines[len(lines)-1], "lab x is down (") {
		t.Errorf("progress:\n%s", out.String())
	}
	out.Reset()
	err = downWithProgress(&out, "x", time.Hour, func() error { return errors.New("boom") })
	if err == nil || strings.Contains(out.String(), "is down") {
		t.Errorf("a failed down: %v\n%s", err, out.String())
	}
}
