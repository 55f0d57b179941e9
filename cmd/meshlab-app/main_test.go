package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The small app binary links the demo app and the standard library, not the one
// binary's heavy packages: their package init is what it exists to avoid.
func TestLinksNoHeavyPackages(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"k8s.io/", "istio.io/", "github.com/gin-gonic/", "google.golang.org/grpc", "google.golang.org/protobuf", "github.com/envoyproxy/", "github.com/prometheus/", "github.com/spf13/cobra", "fortio.org/"} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("meshlab-app links %s", dep)
			}
		}
	}
}

func TestRunRefusesWhatOnlyMeshlabLinks(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--port=18080", "--persona=grpc-echo"},
		{"--port=18080", "--persona=fortio"},
		{"--port=18080", "extra"},
		{"--no-such-flag"},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
