package podinit

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitializedBeforeProtobuf keeps the package's promise in the real binary: Go
// initializes packages in import path order as their imports are ready, and podinit must
// come before the generated protobuf packages (github.com/envoyproxy/..., ~20ms of
// initializers on a busy machine), or every sandboxed app starts that much later.
func TestInitializedBeforeProtobuf(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the meshlab binary")
	}
	bin := filepath.Join(t.TempDir(), "meshlab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/meshlab").CombinedOutput(); err != nil {
		t.Fatalf("build meshlab: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--help")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	out, _ := cmd.CombinedOutput()
	podinit, firstPB := -1, -1
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		switch {
		case f[1] == "github.com/meshlab/meshlab/netns/podinit":
			podinit = i
		case firstPB < 0 && strings.HasPrefix(f[1], "github.com/envoyproxy/"):
			firstPB = i
		}
	}
	if podinit < 0 || firstPB < 0 {
		t.Fatalf("inittrace lacks podinit (%d) or an envoyproxy package (%d):\n%s", podinit, firstPB, out)
	}
	if podinit > firstPB {
		t.Errorf("podinit initialized after the envoyproxy protobuf packages: it imports a package they do not need")
	}
}
