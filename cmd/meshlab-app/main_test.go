package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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

// initBudget bounds what meshlab-app's package inits allocate, which every pod's app
// pays before it serves (2026-11-30: 92 KB, of which 27 KB the grafana persona's YAML
// decoder and 11 KB the unicode tables regexp links; 51 KB at the ninth session's end).
// A persona whose library allocates much at init belongs in `meshlab app` (demoapp's
// Register hooks), run by the lab for that persona only.
const initBudget = 128 << 10

// TestPackageInitWithinBudget builds the binary as make does and sums GODEBUG=inittrace's
// allocations of its package inits.
func TestPackageInitWithinBudget(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "meshlab-app")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, _ := cmd.CombinedOutput() // --help exits 2 after the inits ran
	var total int
	var inits []string
	for _, line := range strings.Split(string(out), "\n") {
		// init go.yaml.in/yaml/v2 @21 ms, 0.16 ms clock, 27072 bytes, 262 allocs
		f := strings.Fields(line)
		if len(f) < 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		total += n
		inits = append(inits, fmt.Sprintf("%7d %s", n, f[1]))
	}
	if len(inits) == 0 {
		t.Fatalf("no inittrace lines in:\n%s", out)
	}
	if total > initBudget {
		sort.Sort(sort.Reverse(sort.StringSlice(inits)))
		t.Errorf("package inits allocate %d bytes, over the budget of %d; the largest:\n%s", total, initBudget, strings.Join(inits[:min(10, len(inits))], "\n"))
	}
}
