package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestHelloLab is the walking skeleton end to end: 100 requests from frontend to backend
// through both sidecars, split between v1 and v2, counted by the sidecars, then down.
func TestHelloLab(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)

	// A second lab with the same name is refused.
	if out, err := meshlab(t, "up", "--name", l.name); err == nil || !strings.Contains(out, "already running") {
		t.Errorf("second `up --name %s`: err=%v, output %q; want a refusal saying it is already running", l.name, err, out)
	}

	counts := map[string]int{}
	const n = 100
	for i := 0; i < n; i++ {
		out, err := meshlab(t, "exec", "--name", l.name, "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/")
		if err != nil {
			t.Fatalf("request %d: %v\n%s", i, err, out)
		}
		var resp struct {
			Pod     string `json:"pod"`
			Service string `json:"service"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("request %d: answer is not the demo app's JSON: %v\n%s", i, err, out)
		}
		counts[resp.Pod]++
	}
	t.Logf("responses by pod: %v", counts)
	for _, pod := range []string{"backend-v1", "backend-v2"} {
		if c := counts[pod]; c < 30 || c > 70 {
			t.Errorf("%s answered %d of %d requests; want 30..70 (round robin over two pods)", pod, c, n)
		}
	}

	// The sidecars counted the traffic, so it really went through them.
	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	defer c.Close()
	pods, err := c.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.PodStatus{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	if got := byName["frontend-v1"].RequestsOut; got < n {
		t.Errorf("frontend-v1 sidecar counted %d outbound requests; want >= %d", got, n)
	}
	if got := byName["backend-v1"].RequestsIn + byName["backend-v2"].RequestsIn; got < n {
		t.Errorf("backend sidecars counted %d inbound requests; want >= %d", got, n)
	}
	for _, p := range pods {
		if !p.Ready || p.Epoch != 0 {
			t.Errorf("pod %s: ready=%v epoch=%d; want ready at epoch 0", p.Name, p.Ready, p.Epoch)
		}
	}
	out, err := meshlab(t, "status", "--name", l.name)
	if err != nil || !strings.Contains(out, "backend-v2") {
		t.Errorf("meshlab status: %v\n%s", err, out)
	}
	// Prometheus can scrape the lab: control-plane metrics and every sidecar's stats,
	// labelled with their pod.
	fams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	if got := gaugeValue(fams["meshlab_xds_connected_proxies"], nil); got != 3 {
		t.Errorf("meshlab_xds_connected_proxies = %v, want 3", got)
	}
	if fams["meshlab_xds_acks_total"] == nil {
		t.Error("no meshlab_xds_acks_total series")
	}
	sent := counterValue(fams["envoy_cluster_upstream_rq_total"], map[string]string{
		"pod": "frontend-v1", "envoy_cluster_name": "outbound|8080||backend.default.svc.cluster.local"})
	if sent < n {
		t.Errorf("envoy_cluster_upstream_rq_total of frontend-v1 to backend = %v, want >= %d", sent, n)
	}

	// The proxy's own view of its config, and the pods' logs.
	out, err = meshlab(t, "proxy-config", "clusters", "frontend-v1", "--name", l.name)
	if err != nil || !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
		return strings.Join(strings.Fields(line), " ") == "backend.default.svc.cluster.local 8080 - outbound EDS"
	}) {
		t.Errorf("meshlab proxy-config clusters: %v\n%s", err, out)
	}
	out, err = meshlab(t, "logs", "frontend-v1", "-c", "agent", "--tail", "50", "--name", l.name)
	if err != nil || !strings.Contains(out, "proxy started") {
		t.Errorf("meshlab logs -c agent: %v\n%s", err, out)
	}

	if out, err := meshlab(t, "down", "--name", l.name); err != nil {
		t.Fatalf("meshlab down: %v\n%s", err, out)
	}
	select {
	case <-l.exited:
		if l.err != nil {
			t.Errorf("meshlab up exited with %v after down", l.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("meshlab up still running 30s after down")
	}
	assertNothingLeft(t, l.name)
}

// TestCleanAfterSIGKILL kills the lab process outright: agents, proxies and apps keep
// running and the namespaces stay, until meshlab clean removes all of it.
func TestCleanAfterSIGKILL(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	if out, err := meshlab(t, "exec", "--name", l.name, "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/"); err != nil {
		t.Fatalf("request before the kill: %v\n%s", err, out)
	}
	if err := l.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.exited
	if out, err := meshlab(t, "clean", "--name", l.name); err != nil {
		t.Fatalf("meshlab clean: %v\n%s", err, out)
	}
	assertNothingLeft(t, l.name)
}

// TestUpRefusesBadScenario checks that an invalid scenario is refused with the file, the
// object and the field, before anything is created.
func TestUpRefusesBadScenario(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testutil.UniqueName(t)
	file := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 70000}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: backend-v1}
spec:
  labels: {app: backend}
  ports: [8080]
`
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := meshlab(t, "up", "--name", name, file)
	if err == nil {
		t.Fatalf("meshlab up accepted an invalid scenario:\n%s", out)
	}
	for _, want := range []string{"bad.yaml", "Service default/backend", "spec.ports[0].port"} {
		if !strings.Contains(out, want) {
			t.Errorf("error %q does not name %q", strings.TrimSpace(out), want)
		}
	}
	assertNothingLeft(t, name)
}
