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

// meshlabInitBudget is what the meshlab module's own packages may allocate in their
// initializers, in bytes. Every process of the one binary (each pod's agent, proxy and
// app) runs every package's init and keeps most of what it allocates (the first GC runs
// at 4 MB of heap), so tables a package builds at init cost that many bytes in every pod
// three times over: build them on first use (sync.OnceValue). Measured 99 KB after
// issue 16 (313 KB before: field-path sets and regexps of controlplane/config, lab/trace's
// regexps, demoapp's /bytes chunk).
const meshlabInitBudget = 128 << 10

// TestMeshlabPackageInitBudget runs the real binary with GODEBUG=inittrace=1 and holds
// the meshlab packages' init allocations to meshlabInitBudget, naming the largest.
func TestMeshlabPackageInitBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the meshlab binary")
	}
	bin := filepath.Join(t.TempDir(), "meshlab")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build meshlab: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "app", "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("meshlab app --help: %v\n%s", err, out)
	}
	type pkg struct {
		name  string
		bytes int
	}
	var own []pkg
	total, all := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		b, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		all += b
		// ambientapi is protoc-gen-go's output (Istio's ambient wire schemas): its
		// descriptors are built at init as every generated package's, go-control-plane's
		// included, which this budget does not count either.
		if strings.HasPrefix(f[1], "github.com/meshlab/meshlab/") && !strings.HasPrefix(f[1], "github.com/meshlab/meshlab/ambientapi/") {
			own = append(own, pkg{f[1], b})
			total += b
		}
	}
	if len(own) == 0 || all == 0 {
		t.Fatalf("inittrace names no meshlab package:\n%s", out)
	}
	t.Logf("package init: %d KB in all, %d KB in meshlab's %d packages", all>>10, total>>10, len(own))
	if total > meshlabInitBudget {
		sort.Slice(own, func(i, j int) bool { return own[i].bytes > own[j].bytes })
		var top []string
		for _, p := range own[:min(5, len(own))] {
			top = append(top, fmt.Sprintf("%s %d KB", p.name, p.bytes>>10))
		}
		t.Errorf("meshlab's package initializers allocate %d KB, budget %d KB; largest: %s", total>>10, meshlabInitBudget>>10, strings.Join(top, ", "))
	}
}
