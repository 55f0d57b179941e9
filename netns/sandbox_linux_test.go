package netns

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestStartSandboxed runs a shell as a sandboxed app and reads what it sees: its uid, no
// capabilities, no_new_privs, seccomp, only its own PID namespace, the pod's resolv.conf,
// hosts and hostname, and a hidden directory empty.
func TestStartSandboxed(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	prefix := testNames(t)
	ns := prefix + "sb"
	if err := Create(ns); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} { // the app's uid must reach the hidden directory
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	resolv, hosts, hidden := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hosts"), filepath.Join(dir, "hidden")
	for p, s := range map[string]string{resolv: "search ns1.svc.cluster.local\nnameserver 10.96.0.10\n", hosts: "10.244.0.9\tpod-a\n"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(hidden, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := Sandbox{UID: 1879113729, GID: 1879113729, Hostname: "pod-a", ResolvConf: resolv, Hosts: hosts, Hide: []string{hidden}}
	script := `grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo "pids: $(ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ')"
echo "hostname: $(cat /proc/sys/kernel/hostname)"
echo "resolv: $(cat /etc/resolv.conf | tr '\n' ';')"
echo "hosts: $(cat /etc/hosts | tr '\n' ';')"
echo "hidden: $(ls -A ` + hidden + ` | tr '\n' ' ')."
echo hi > /etc/hosts 2>/dev/null && echo "hosts writable"
exit 3`
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
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("sandboxed app: %v, want exit status 3 (passed on by the init)\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("sandboxed app did not exit\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"Uid:\t1879113729\t1879113729\t1879113729\t1879113729",
		"Gid:\t1879113729\t1879113729\t1879113729\t1879113729",
		"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
		"hostname: pod-a",
		"resolv: search ns1.svc.cluster.local;nameserver 10.96.0.10;",
		"hosts: 10.244.0.9\tpod-a;",
		"hidden: .",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sandboxed app output lacks %q:\n%s", want, got)
		}
	}
	if !regexp.MustCompile(`(?m)^Groups:\s*$`).MatchString(got) {
		t.Errorf("the app has supplementary groups:\n%s", got)
	}
	if strings.Contains(got, "hosts writable") {
		t.Errorf("the app could write /etc/hosts:\n%s", got)
	}
	// The app's PID namespace holds the init (1) and the shell and its children only.
	for _, line := range strings.Split(got, "\n") {
		if p, ok := strings.CutPrefix(line, "pids: "); ok {
			if f := strings.Fields(p); len(f) == 0 || f[0] != "1" || len(f) > 6 {
				t.Errorf("the app sees pids %v, want its own namespace's (1 and a few)", f)
			}
		}
	}
}

func TestSandboxValidate(t *testing.T) {
	for _, tt := range []struct {
		sb   Sandbox
		want string
	}{
		{Sandbox{GID: 5}, "uid: must not be 0"},
		{Sandbox{UID: 5}, "gid: must not be 0"},
		{Sandbox{UID: 5, GID: 5, Hide: []string{"/"}}, `hide "/"`},
		{Sandbox{UID: 5, GID: 5, Hide: []string{"run"}}, `hide "run"`},
		{Sandbox{UID: 5, GID: 5, Hosts: "etc/hosts"}, `hosts "etc/hosts": must be an absolute path`},
	} {
		if err := tt.sb.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.sb, err, tt.want)
		}
	}
	if err := (Sandbox{UID: 5, GID: 5, Hide: []string{"/run/x"}}).Validate(); err != nil {
		t.Errorf("valid sandbox: %v", err)
	}
}
