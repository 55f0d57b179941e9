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

// TestSandboxBindsIntoHiddenDir shares one pod directory with a sandboxed app, as a
// proxyless pod's run directory is shared (the bootstrap, XDS socket and certificate
// files): the directory shows at its own path inside the hidden run root, read-only, and
// follows the agent's later writes; nothing else of the hidden directory shows (another
// pod's files, the lab's sockets); the app's environment has the sandbox's Env.
func TestSandboxBindsIntoHiddenDir(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	ns := testNames(t) + "bind"
	if err := Create(ns); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hidden := filepath.Join(root, "run")
	mine := filepath.Join(hidden, "lab", "pods", "a", "istio-xds")
	theirs := filepath.Join(hidden, "lab", "pods", "b", "istio-xds")
	for _, d := range []string{mine, theirs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{
		filepath.Join(mine, "grpc-bootstrap.json"):   "mine\n",
		filepath.Join(theirs, "grpc-bootstrap.json"): "theirs\n",
		filepath.Join(hidden, "lab", "xds.sock"):     "lab socket\n",
	} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sb := Sandbox{UID: 1879113730, GID: 1879113730, Hide: []string{hidden},
		Binds: []Bind{{Src: mine, Dst: mine}},
		Env:   []string{"GRPC_XDS_BOOTSTRAP=" + filepath.Join(mine, "grpc-bootstrap.json"), "HOME=/nonexistent-home"}}
	// The app waits for the agent's second write before it reads the file again.
	script := `echo "env: $GRPC_XDS_BOOTSTRAP $HOME"
echo "mine: $(cat ` + mine + `/grpc-bootstrap.json)"
echo "theirs: $(ls ` + theirs + ` 2>/dev/null | tr '\n' ' ')."
echo "hidden: $(ls -A ` + hidden + ` | tr '\n' ' ')."
echo "lab: $(ls -A ` + hidden + `/lab | tr '\n' ' ')."
echo x > ` + mine + `/new 2>/dev/null && echo "bound dir writable"
mkdir ` + hidden + `/x 2>/dev/null && echo "hidden dir writable"
i=0; while [ ! -e ` + mine + `/renewed ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
echo "renewed: $(cat ` + mine + `/renewed)"`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := StartSandboxed(ns, cmd, sb); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := os.WriteFile(filepath.Join(mine, "renewed"), []byte("yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sandboxed app: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("sandboxed app did not exit\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"env: " + filepath.Join(mine, "grpc-bootstrap.json") + " /nonexistent-home",
		"mine: mine",
		"theirs: .",     // pod b's directory is not there
		"hidden: lab .", // only the path to the bound directory
		"lab: pods .",   // not the lab's sockets
		"renewed: yes",  // the agent's later writes show
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sandboxed app output lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"bound dir writable", "hidden dir writable"} {
		if strings.Contains(got, bad) {
			t.Errorf("%s:\n%s", bad, got)
		}
	}
	if _, err := os.Stat(filepath.Join(hidden, "x")); err == nil {
		t.Errorf("the app made a directory in the host's hidden directory")
	}
}

func TestSandboxValidateBindsAndEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sb   Sandbox
		want string
	}{
		{Sandbox{UID: 5, GID: 5, Binds: []Bind{{Src: "rel", Dst: "/x"}}}, `bind "rel" on "/x"`},
		{Sandbox{UID: 5, GID: 5, Binds: []Bind{{Src: "/a", Dst: "/"}}}, `bind "/a" on "/"`},
		{Sandbox{UID: 5, GID: 5, Env: []string{"NOVALUE"}}, `env "NOVALUE": want KEY=VALUE`},
		{Sandbox{UID: 5, GID: 5, Env: []string{"=v"}}, `env "=v"`},
	} {
		if err := tt.sb.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.sb, err, tt.want)
		}
	}
	env := Sandbox{Env: []string{"A=new", "C=3"}}.Environ([]string{"A=old", "AB=2", "B=1"})
	if strings.Join(env, " ") != "AB=2 B=1 A=new C=3" {
		t.Errorf("Environ = %v, want A replaced, AB kept, C added", env)
	}
}
