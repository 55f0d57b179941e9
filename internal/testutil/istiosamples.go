package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// IstioSamples returns the samples/ directory of the Istio module the fidelity module
// pins (Istio's sample manifests, unchanged, as the docs apply them). Without it in the
// module cache the test is skipped, and fails when CI=true.
func IstioSamples(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "fidelity", "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no fidelity/go.mod above the test's directory")
		}
		dir = parent
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio")
	cmd.Dir = filepath.Join(dir, "fidelity")
	out, err := cmd.Output()
	mod := strings.TrimSpace(string(out))
	if err == nil && mod != "" {
		if _, err = os.Stat(filepath.Join(mod, "samples")); err == nil {
			return filepath.Join(mod, "samples")
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("Istio's module is not in the module cache (go list -m istio.io/istio in fidelity/: %v): run `go mod download` there", err)
	}
	tb.Skipf("skipped: Istio's module is not in the module cache (go list -m istio.io/istio in fidelity/: %v)", err)
	return ""
}
