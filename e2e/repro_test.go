package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios/repro"
)

const reproVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend, namespace: default}
spec:
  hosts: [backend]
  http:
    - match: [{headers: {end-user: {exact: jason}}}]
      timeout: 3s
      route: [{destination: {host: backend}}]
    - route: [{destination: {host: backend}}]
`

// TestReproExportRun exports a hello lab with a VirtualService applied, stops it, and
// rebuilds it with `meshlab repro run`: the VirtualService is there, the rebuilt lab
// pushes the same routes, and repro run finds no difference with the recording.
func TestReproExportRun(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	l := startLab(t)
	vs := filepath.Join(dir, "vs.yaml")
	if err := os.WriteFile(vs, []byte(reproVS), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", vs); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	routesBefore, err := meshlab(t, "proxy-config", "routes", "frontend-v1", "--lab", l.name, "-o", "json")
	if err != nil {
		t.Fatalf("proxy-config routes: %v\n%s", err, routesBefore)
	}
	// Export once every proxy ACKed the apply's push: the recording is compared with the
	// rebuilt lab, which runs until it is synced.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := meshlab(t, "proxy-status", "--name", l.name)
		synced := err == nil
		for _, pod := range []string{"frontend-v1", "backend-v1", "backend-v2"} {
			found := false
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, pod+".") {
					found = strings.Count(line, "SYNCED") == 4
				}
			}
			synced = synced && found
		}
		if synced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxies not synced 30 s after apply:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	file := filepath.Join(dir, "repro.yaml")
	if out, err := meshlab(t, "repro", "export", "--name", l.name, "-f", file); err != nil {
		t.Fatalf("repro export: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	facts, err := repro.Read(data)
	if err != nil || len(facts.Pods) == 0 || len(facts.Pods[0].History) == 0 || len(facts.Pods[0].Capture) == 0 {
		t.Fatalf("facts %+v, %v\n%s", facts, err, data)
	}
	if !strings.Contains(string(data), "end-user") {
		t.Fatalf("the export lacks the VirtualService:\n%s", data)
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("first lab did not stop")
	}

	name, out := startRepro(t, file)
	if !strings.Contains(out, "no differences") {
		t.Fatalf("repro run found differences:\n%s", out)
	}
	got, err := meshlab(t, "get", "virtualservice", "--name", name)
	if err != nil || !strings.Contains(got, "backend") {
		t.Fatalf("get virtualservice: %v\n%s", err, got)
	}
	routesAfter, err := meshlab(t, "proxy-config", "routes", "frontend-v1", "--lab", name, "-o", "json")
	if err != nil {
		t.Fatalf("proxy-config routes: %v\n%s", err, routesAfter)
	}
	if !strings.Contains(routesBefore, "jason") || stripVersions(routesAfter) != stripVersions(routesBefore) {
		t.Fatalf("routes differ:\nbefore %s\nafter %s", routesBefore, routesAfter)
	}
}

// stripVersions drops the lines of a config dump that differ between two labs with the
// same config: update times and version strings.
func stripVersions(dump string) string {
	var keep []string
	for _, line := range strings.Split(dump, "\n") {
		if !strings.Contains(line, `"last_updated"`) && !strings.Contains(line, `"version_info"`) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// startRepro runs `meshlab repro run file` as a unique lab until it printed its
// comparison, and returns the lab's name and its output so far. Cleanup stops it.
func startRepro(t *testing.T, file string) (string, string) {
	t.Helper()
	bin := meshlabBin(t)
	name := testutil.UniqueName(t)
	cmd := exec.Command(bin, "repro", "run", file, "--name", name, "--drain-duration", "0")
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	cmd.Stdout = io.MultiWriter(out, pw)
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		_ = exec.Command(bin, "clean", "--force", "--name", name).Run()
		assertNothingLeft(t, name)
	})
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "lab "+name+" is up; stop it") {
				close(done)
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case <-done:
	case <-exited:
		t.Fatalf("repro run exited early:\n%s", out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("repro run not up after 90s:\n%s", out.String())
	}
	return name, out.String()
}
