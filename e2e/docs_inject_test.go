package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsManualInjection follows istio.io's manual sidecar injection as the pages write
// it: `kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml)` in a namespace
// without the injection label gives the sleep pod its sidecar (2/2 Running), because the
// injected Deployment carries it.
func TestDocsManualInjection(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	l, _ := startTaskLab(t)
	bin := meshlabBin(t)
	sleep := filepath.Join(samples, "sleep/sleep.yaml")
	out, err := exec.Command("bash", "-c", `"$0" --lab "$1" apply -f <("$0" kube-inject -f "$2")`, bin, l.name, sleep).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deployment.apps/sleep created\n") {
		t.Fatalf("apply -f <(kube-inject -f samples/sleep/sleep.yaml): %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := meshlab(t, "--lab", l.name, "get", "pod", "-l", "app=sleep")
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if err == nil && len(rows) == 2 {
			f := strings.Fields(rows[1])
			if len(f) == 5 && f[1] == "2/2" && f[2] == "Running" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("get pod -l app=sleep: %v\n%s\nwant the sleep pod 2/2 Running (its sidecar from the injected Deployment)", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
