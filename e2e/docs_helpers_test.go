package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// startTaskLab starts the lab an istio.io task page begins from: a cluster where nothing
// is applied yet (the page installs Istio, then applies Istio's samples). It returns the
// lab and run, which runs a meshlab command in that lab (the page's kubectl or istioctl
// command) and fails the test when it fails.
func startTaskLab(t *testing.T) (*runningLab, func(args ...string) string) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("# a cluster before the task\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLab(t, empty)
	return l, func(args ...string) string {
		t.Helper()
		return mustMeshlab(t, append([]string{"--lab", l.name}, args...)...)
	}
}
