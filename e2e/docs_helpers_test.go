package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// taskLab is a lab an istio.io task page runs in, with the ways the page's commands are
// run in it.
type taskLab struct {
	*runningLab
	// run runs a meshlab command in the lab (the page's kubectl or istioctl command) and
	// fails the test when it fails.
	run func(args ...string) string
	// poll runs the command until ok accepts its output (a loaded machine is slow to
	// bring pods up and push config), for at most 30 s.
	poll func(what string, ok func(string) bool, args ...string) string
	// step logs what was done, with the time since the lab was up.
	step func(what string)
}

// startTaskLabFrom starts a lab of the objects in cluster (YAML), the state the page
// begins from; upArgs are more of up's flags (--control-plane=istiod ...), given 3
// minutes to come up.
func startTaskLabFrom(t *testing.T, cluster string, upArgs ...string) *taskLab {
	t.Helper()
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	var l *runningLab
	if len(upArgs) == 0 {
		l = startLab(t, file)
	} else {
		l = startLabWithin(t, 3*time.Minute, append(upArgs, file)...)
	}
	start := time.Now()
	return &taskLab{
		runningLab: l,
		run: func(args ...string) string {
			t.Helper()
			return mustMeshlab(t, append([]string{"--lab", l.name}, args...)...)
		},
		poll: func(what string, ok func(string) bool, args ...string) string {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, _ := meshlab(t, append([]string{"--lab", l.name}, args...)...)
				if ok(out) {
					return out
				}
				if time.Now().After(deadline) {
					t.Fatalf("meshlab %s:\n%s\nwant %s", strings.Join(args, " "), out, what)
				}
				time.Sleep(300 * time.Millisecond)
			}
		},
		step: func(what string) {
			t.Helper()
			t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), what)
		},
	}
}

// startTaskLab starts the lab a sidecar task page begins from: a cluster where nothing
// is applied yet (the page installs Istio, then applies Istio's samples).
func startTaskLab(t *testing.T) (*runningLab, func(args ...string) string) {
	t.Helper()
	tl := startTaskLabFrom(t, "# a cluster before the task\n")
	return tl.runningLab, tl.run
}

// startAmbientBookinfo starts the lab Istio's ambient pages after Getting Started run in:
// Bookinfo and curl from Istio's samples (unchanged) in the default namespace, labelled
// istio.io/dataplane-mode=ambient. It returns the lab and the samples' directory.
func startAmbientBookinfo(t *testing.T) (*taskLab, string) {
	t.Helper()
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, ambientClusterYAML)
	tl.run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	tl.run("apply", "-f", filepath.Join(samples, "curl/curl.yaml"))
	tl.run("label", "namespace", "default", "istio.io/dataplane-mode=ambient")
	return tl, samples
}

// ambientClusterYAML is the cluster Istio's ambient pages begin from: the default
// namespace declared without labels, as a cluster's is (a lab's undeclared namespace
// injects sidecars by meshlab's own default).
const ambientClusterYAML = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n"
