package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestKubectlCp copies files into a pod's /tmp and out of it as kubectl cp does (the
// sidecar TLS termination page's three forms), and reads them in the pod with exec: they
// are the app's (its uid), the pod's alone (not in the host's /tmp, not in another
// pod's), and a destination outside /tmp is refused by name with nothing copied.
func TestKubectlCp(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: test\n")
	tl.run("apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"))
	tl.run("-n", "test", "apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"))
	tl.run("wait", "--for=condition=ready", "pod", "-l", "app=sleep", "--timeout=120s")
	tl.run("-n", "test", "wait", "--for=condition=ready", "pod", "-l", "app=sleep", "--timeout=120s")
	client := strings.TrimSpace(tl.run("get", "pod", "-l", "app=sleep", "-o", "jsonpath={.items..metadata.name}"))
	other := strings.TrimSpace(tl.run("-n", "test", "get", "pod", "-l", "app=sleep", "-o", "jsonpath={.items..metadata.name}"))

	dir := t.TempDir()
	for name, body := range map[string]string{"client.key": "KEY\n", "client.crt": "CRT\n", "example.com.crt": "CA\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The page's lines, run from the directory holding the files.
	for _, line := range [][]string{
		{"cp", "client.key", "default/" + client + ":/tmp/"},
		{"cp", "client.crt", "default/" + client + ":/tmp/"},
		{"cp", "example.com.crt", "default/" + client + ":/tmp/ca.crt"},
	} {
		cmd := exec.Command(meshlabBin(t), append([]string{"--lab", tl.name}, line...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
			t.Fatalf("meshlab %s: %v, printed %q (kubectl cp prints nothing)", strings.Join(line, " "), err, out)
		}
	}
	got := tl.run("exec", client, "-c", "sleep", "--", "cat", "/tmp/client.key", "/tmp/client.crt", "/tmp/ca.crt")
	if got != "KEY\nCRT\nCA\n" {
		t.Errorf("the pod reads %q from its /tmp, want the copied files", got)
	}
	uid := podRecord(t, labRecord(t, tl.name), client).AppUID
	if owner := strings.TrimSpace(tl.run("exec", client, "--", "stat", "-c", "%u", "/tmp/ca.crt")); owner != strconv.FormatUint(uint64(uid), 10) {
		t.Errorf("/tmp/ca.crt in the pod is owned by %s, want the app's uid %d", owner, uid)
	}
	if _, err := os.Stat("/tmp/ca.crt"); err == nil {
		t.Errorf("the copy reached the host's /tmp")
	}
	if out, err := meshlab(t, "--lab", tl.name, "-n", "test", "exec", other, "--", "cat", "/tmp/ca.crt"); err == nil {
		t.Errorf("pod %s reads the other pod's /tmp/ca.crt: %q", other, out)
	}
	back := filepath.Join(dir, "back.crt")
	tl.run("cp", client+":/tmp/ca.crt", back)
	if b, err := os.ReadFile(back); err != nil || string(b) != "CA\n" {
		t.Errorf("cp out of the pod wrote %q (%v), want CA", b, err)
	}
	out, err := meshlab(t, "--lab", tl.name, "cp", filepath.Join(dir, "client.key"), client+":/etc/client.key")
	if err == nil || !strings.Contains(out, "cp into a pod: /etc/client.key: a meshlab pod writes only in its own /tmp") {
		t.Errorf("cp to /etc: %v\n%s\nwant the refusal naming the path", err, out)
	}
	podTmp := filepath.Join(lab.PathsFor(lab.DefaultRunRoot, tl.name).PodDir(client), "tmp")
	if _, err := os.Stat(filepath.Join(podTmp, "ca.crt")); err != nil {
		t.Errorf("the pod's /tmp is not kept in its run directory: %v", err)
	}
	// down leaves nothing of the pods' /tmp (their run directories and mount namespaces).
	if out, err := meshlab(t, "down", "--name", tl.name); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	assertNothingLeft(t, tl.name)
	if _, err := os.Stat(podTmp); !os.IsNotExist(err) {
		t.Errorf("the pod's /tmp %s is left after down (stat: %v)", podTmp, err)
	}
}
