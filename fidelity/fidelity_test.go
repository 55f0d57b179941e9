package fidelity

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
)

// meshlabBin is the meshlab binary TestMain builds for the sidecars.
var meshlabBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meshlab-fidelity-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The sidecar run's proxies and the ambient run's waypoints.
	if meshlabBin, err = buildMeshlab(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	quietIstio()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildOptions are the lab's default CIDRs (lab.DefaultPodCIDR, lab.DefaultServiceCIDR).
var buildOptions = config.BuildOptions{
	PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
}

// scenarios returns every shipped scenario (scenarios/hello.yaml and
// scenarios/labs/*.yaml), then the ratchet's own (testdata/scenarios/*.yaml: what no
// shipped scenario exercises, e.g. TLS routing by SNI).
func scenarios(t *testing.T) []string {
	t.Helper()
	labs, err := filepath.Glob(filepath.Join("..", "scenarios", "labs", "*.yaml"))
	if err != nil || len(labs) == 0 {
		t.Fatalf("find scenarios: %v (%d found)", err, len(labs))
	}
	own, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatalf("find the ratchet's scenarios: %v", err)
	}
	return append(append([]string{filepath.Join("..", "scenarios", "hello.yaml")}, labs...), own...)
}

// scenarioName names a scenario file in tables and known lists: hello, labs-bookinfo,
// and fidelity-<name> for the ratchet's own.
func scenarioName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".yaml")
	switch filepath.Base(filepath.Dir(path)) {
	case "labs":
		return "labs-" + base
	case "scenarios":
		if filepath.Base(filepath.Dir(filepath.Dir(path))) == "testdata" {
			return "fidelity-" + base
		}
	}
	return base
}

// TestFidelity runs every shipped scenario through istiod's generator, connects a meshlab
// proxy per sidecar pod, prints what it accepted and how meshlab's own resources differ,
// and holds both to the scenario's known list.
func TestFidelity(t *testing.T) {
	skipInAmbientMode(t)
	update := os.Getenv("MESHLAB_UPDATE_GOLDEN") == "1"
	var rows []summary
	defer func() { writeSummary(os.Stdout, rows) }()
	for _, path := range scenarios(t) {
		name := scenarioName(path)
		t.Run(name, func(t *testing.T) {
			results := runScenario(t, path)
			writeTable(os.Stdout, name, results)
			rows = append(rows, summarize(name, results))
			found := map[string]bool{}
			for _, r := range results {
				addFound(found, r.Verdicts, r.Diffs)
			}
			checkKnown(t, name, found, update)
		})
	}
}

// addFound adds the refusals of verdicts and the differences diffs to found, as the known
// lists write them.
func addFound(found map[string]bool, verdicts []verdict, diffs []difference) {
	for _, v := range verdicts {
		if !v.Accepted {
			found[fmt.Sprintf("refuse %s %s: %s", v.Type, v.Name, v.Reason)] = true
		}
	}
	for _, d := range diffs {
		found["diff "+d.String()] = true
	}
}

// checkKnown holds found (refusals and differences, the sidecar run's or the ambient
// run's) to the scenario's known list, or rewrites the list when update.
func checkKnown(t *testing.T, name string, found map[string]bool, update bool) {
	t.Helper()
	kp := knownPath(name)
	known, err := readKnown(kp)
	if err != nil {
		t.Fatal(err)
	}
	if update {
		patterns, err := readPatterns(reasonsPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeKnown(kp, name, known, found, patterns); err != nil {
			t.Fatal(err)
		}
		return
	}
	added, gone := known.compare(found)
	fmt.Printf("known list %s: %d entries, %d found, %d new, %d gone\n", kp, len(known), len(found), len(added), len(gone))
	if len(added) > 0 {
		t.Errorf("%d refusals or differences from istiod are not in %s (fix them, or document them: MESHLAB_UPDATE_GOLDEN=1 and write their reason):\n  %s",
			len(added), kp, strings.Join(head(added, 40), "\n  "))
	}
	if len(gone) > 0 {
		t.Errorf("%d entries of %s are gone, remove them (MESHLAB_UPDATE_GOLDEN=1 does):\n  %s",
			len(gone), kp, strings.Join(head(gone, 40), "\n  "))
	}
}

// skipInAmbientMode skips a sidecar check in the ambient run: with PILOT_ENABLE_AMBIENT
// set istiod gives every sidecar HBONE listeners and clusters the known lists do not
// hold, and TestMain builds no meshlab binary.
func skipInAmbientMode(t *testing.T) {
	t.Helper()
	if ambientMode() {
		t.Skip("a sidecar check: runs without PILOT_ENABLE_AMBIENT (make fidelity's first go test)")
	}
}

func head(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("... and %d more", len(l)-n))
}

// runScenario loads one scenario with meshlab's loader, serves it from istiod and
// measures each sidecar pod in turn.
func runScenario(t *testing.T, path string) []podResult {
	t.Helper()
	sc, err := loadScenario(path)
	if err != nil {
		t.Fatalf("load scenario: %v", err)
	}
	m, err := sc.Build(buildOptions)
	if err != nil {
		t.Fatalf("build model: %v", err)
	}
	o, err := startOracle(t, m)
	if err != nil {
		t.Fatal(err)
	}
	var results []podResult
	for _, p := range sidecarPods(m) {
		r, err := measurePod(t, o, m, p)
		if err != nil {
			t.Fatalf("pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		results = append(results, r)
	}
	return results
}

// measurePod runs a meshlab proxy for p against istiod through a recording relay until
// every response is answered, then judges what it accepted and diffs meshlab's own
// resources for p against istiod's.
func measurePod(t *testing.T, o *oracle, m *model.Model, p *model.Pod) (podResult, error) {
	t.Helper()
	dir := t.TempDir()
	r, err := startRelay(o.addr, filepath.Join(dir, "xds.sock"))
	if err != nil {
		return podResult{}, err
	}
	defer r.stop()
	sc, err := startSidecar(meshlabBin, dir, p, r.addr)
	if err != nil {
		return podResult{}, err
	}
	log := ""
	defer func() {
		if t.Failed() && log != "" {
			t.Logf("proxy log of %s:\n%s", p.Name, truncate(log, 4000))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var dump map[string]any
	last, stableSince := -1, time.Now()
	for {
		ok, n := r.settled()
		if n != last {
			last, stableSince = n, time.Now()
		}
		if ok && time.Since(stableSince) > 700*time.Millisecond {
			if dump, err = sc.configDump(ctx); err == nil {
				break
			}
		}
		select {
		case err := <-sc.done:
			log = sc.stop()
			return podResult{}, fmt.Errorf("meshlab proxy exited: %w", err)
		case <-ctx.Done():
			log = sc.stop()
			return podResult{}, fmt.Errorf("wait for the proxy to answer istiod: %w", errors.Join(ctx.Err(), err))
		case <-time.After(100 * time.Millisecond):
		}
	}
	log = sc.stop()
	sent, nacks := r.snapshot()
	res := podResult{Pod: p.Name, Verdicts: judge(sent, nacks, dump)}
	istiod, err := collectIstiod(context.Background(), o.addr, p)
	if err != nil {
		return podResult{}, err
	}
	ours, err := meshlabResources(m, p)
	if err != nil {
		return podResult{}, err
	}
	res.Diffs = diffResources(istiod, ours)
	return res, nil
}

func itoa(n uint16) string { return strconv.Itoa(int(n)) }
