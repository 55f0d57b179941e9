package fidelity

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"istio.io/istio/pilot/pkg/features"
)

// ambientScenarios returns every shipped scenario with a pod in ambient mode
// (scenarios/*.yaml, scenarios/labs/*.yaml), then the ratchet's own
// (testdata/ambient/*.yaml), each with its name in tables and known lists.
func ambientScenarios(t *testing.T) (paths, names []string) {
	t.Helper()
	var shipped []string
	for _, g := range []string{filepath.Join("..", "scenarios", "*.yaml"), filepath.Join("..", "scenarios", "labs", "*.yaml")} {
		l, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		shipped = append(shipped, l...)
	}
	for _, path := range shipped {
		sc, err := loadScenario(path)
		if err != nil {
			continue // not a scenario (or not loadable): the sidecar run and the scenario tests judge it
		}
		m, err := sc.Build(buildOptions)
		if err != nil || len(ambientPods(m)) == 0 {
			continue
		}
		paths, names = append(paths, path), append(names, "ambient-"+scenarioName(path))
	}
	own, err := filepath.Glob(filepath.Join("testdata", "ambient", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range own {
		paths, names = append(paths, path), append(names, "ambient-fidelity-"+strings.TrimSuffix(filepath.Base(path), ".yaml"))
	}
	return paths, names
}

// TestAmbientFidelity runs every ambient scenario through istiod's generator with ambient
// on, collects istiod's WDS as a ztunnel would (delta ADS, wildcard), diffs meshlab's WDS
// generator against it resource by resource, feeds it to meshlab's ztunnel state and
// holds the differences and refusals to the scenario's known list. It needs
// PILOT_ENABLE_AMBIENT=true in the process's environment (make fidelity sets it).
func TestAmbientFidelity(t *testing.T) {
	if !ambientMode() {
		t.Skip("istiod's ambient flags are fixed at process start: run with PILOT_ENABLE_AMBIENT=true (make fidelity does)")
	}
	if !features.EnableAmbient {
		t.Fatal("PILOT_ENABLE_AMBIENT=true is set but Istio's features.EnableAmbient is false")
	}
	update := os.Getenv("MESHLAB_UPDATE_GOLDEN") == "1"
	paths, names := ambientScenarios(t)
	if len(paths) == 0 {
		t.Fatal("no ambient scenario found")
	}
	var rows []summary
	defer func() { writeAmbientSummary(os.Stdout, rows) }()
	for i, path := range paths {
		name := names[i]
		t.Run(name, func(t *testing.T) {
			r := runAmbientScenario(t, path)
			writeAmbientTable(os.Stdout, name, r)
			rows = append(rows, summarizeAmbient(name, r))
			found := map[string]bool{}
			addFound(found, r.Verdicts, r.Diffs)
			checkKnown(t, name, found, update)
		})
	}
}

// runAmbientScenario loads one scenario, serves it from istiod with ambient on and
// measures istiod's WDS against meshlab's generator and meshlab's ztunnel.
func runAmbientScenario(t *testing.T, path string) ambientResult {
	t.Helper()
	sc, err := loadScenario(path)
	if err != nil {
		t.Fatalf("load scenario: %v", err)
	}
	m, err := sc.Build(buildOptions)
	if err != nil {
		t.Fatalf("build model: %v", err)
	}
	enroll(m)
	o, err := startAmbientOracle(t, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	istiod, err := collectWDS(ctx, o.addr, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for typ, rs := range istiod {
		for n, r := range rs {
			if w := wdsName(r); w != n {
				t.Errorf("istiod named a %s resource %q, the harness names it %q", shortNames[typ], n, w)
			}
		}
	}
	ours, err := meshlabWDS(m)
	if err != nil {
		t.Fatal(err)
	}
	res := ambientResult{AmbientPods: len(ambientPods(m)), Sent: istiod, Diffs: diffTypes(ambientTypes, istiod, ours)}
	res.Verdicts, res.Accept = ztunnelAccepts(ctx, t, o.addr, istiod)
	return res
}
