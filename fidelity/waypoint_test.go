package fidelity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"istio.io/istio/pilot/pkg/features"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestAmbientWaypointFidelity serves every waypoint scenario from istiod with ambient on,
// collects what istiod generates for each waypoint's proxy (node waypoint~...: LDS, CDS
// and the RDS and EDS they name), diffs meshlab's waypoint generator against it, feeds it
// live to a meshlab proxy announcing that node (what it accepted and refused) and holds
// both to the scenario's known list. MESHLAB_UPDATE_GOLDEN=1 also rewrites istiod's dump
// (testdata/waypoint/<scenario>.istiod.json), the reference meshlab's generator follows.
func TestAmbientWaypointFidelity(t *testing.T) {
	if !ambientMode() {
		t.Skip("istiod's ambient flags are fixed at process start: run with PILOT_ENABLE_AMBIENT=true (make fidelity does)")
	}
	if !features.EnableAmbient {
		t.Fatal("PILOT_ENABLE_AMBIENT=true is set but Istio's features.EnableAmbient is false")
	}
	update := os.Getenv("MESHLAB_UPDATE_GOLDEN") == "1"
	paths, names := waypointScenarios(t)
	if len(paths) == 0 {
		t.Fatal("no waypoint scenario found")
	}
	var rows []summary
	defer func() { writeSummary(os.Stdout, rows) }()
	for i, path := range paths {
		name := names[i]
		t.Run(name, func(t *testing.T) {
			results := runWaypointScenario(t, path, update)
			writeTable(os.Stdout, name, results)
			rows = append(rows, summarize(name, results))
			found := map[string]bool{}
			for _, r := range results {
				for _, v := range r.Verdicts {
					if !v.Accepted {
						found[fmt.Sprintf("refuse %s %s: %s", v.Type, v.Name, v.Reason)] = true
					}
				}
				for _, d := range r.Diffs {
					found["diff "+d.String()] = true
				}
			}
			checkKnown(t, name, found, update)
		})
	}
}

// runWaypointScenario measures every waypoint of one scenario.
func runWaypointScenario(t *testing.T, path string, update bool) []podResult {
	t.Helper()
	m, ws, err := loadWaypointScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) == 0 {
		t.Fatalf("%s declares no Gateway of class %s", path, model.WaypointGatewayClass)
	}
	enroll(m)
	routes, err := scenarioHTTPRoutes(path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := startWaypointOracle(t, m, routes)
	if err != nil {
		t.Fatal(err)
	}
	var results []podResult
	for _, w := range ws {
		r, err := measureWaypoint(t, o, m, w, strings.TrimSuffix(path, ".yaml")+".istiod.json", update)
		if err != nil {
			t.Fatalf("waypoint %s: %v", w.W.ResourceName(), err)
		}
		results = append(results, r)
	}
	return results
}

// measureWaypoint collects istiod's resources for w (and dumps them when update), diffs
// meshlab's, and runs a meshlab proxy as w's against istiod through a recording relay.
func measureWaypoint(t *testing.T, o *oracle, m *model.Model, w *waypointDecl, dumpPath string, update bool) (podResult, error) {
	t.Helper()
	node, err := waypointNode(w)
	if err != nil {
		return podResult{}, err
	}
	istiod, err := collectIstiodNode(context.Background(), o.addr, node)
	if err != nil {
		return podResult{}, err
	}
	if update {
		if err := writeDump(dumpPath, istiod); err != nil {
			return podResult{}, err
		}
	}
	if d := os.Getenv("MESHLAB_FIDELITY_DUMP"); d != "" {
		if err := writeDump(filepath.Join(d, w.W.Namespace+"."+w.W.Name+".istiod.json"), istiod); err != nil {
			return podResult{}, err
		}
	}
	ours, err := meshlabWaypoint(m, w)
	if err != nil {
		return podResult{}, err
	}
	res := podResult{Pod: w.Pod.Name, Diffs: diffResources(istiod, ours)}
	res.Verdicts, err = feedWaypoint(t, o, w)
	return res, err
}

// feedWaypoint runs a meshlab proxy announcing w's node against istiod (through a
// recording relay) until it answered everything, and judges what it accepted.
func feedWaypoint(t *testing.T, o *oracle, w *waypointDecl) (_ []verdict, err error) {
	t.Helper()
	dir := t.TempDir()
	r, err := startRelay(o.addr, filepath.Join(dir, "xds.sock"))
	if err != nil {
		return nil, err
	}
	defer r.stop()
	boot, err := bootstrapNode(waypointNodeID(w), w.W.Name+"."+w.W.Namespace, waypointMetadata(w), r.addr, adminPort)
	if err != nil {
		return nil, err
	}
	sc, err := startProxy(meshlabBin, dir, w.Pod, waypointNodeID(w), boot, r.addr)
	if err != nil {
		return nil, err
	}
	log := ""
	defer func() {
		if (err != nil || t.Failed()) && log != "" {
			t.Logf("proxy log of waypoint %s:\n%s", w.W.Name, truncate(log, 4000))
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
			return nil, fmt.Errorf("meshlab proxy exited: %w", err)
		case <-ctx.Done():
			// A proxy that never asks for listeners (its clusters never warm) is judged
			// on what it was sent: the types it never asked for are missing from the table.
			dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
			dump, err = sc.configDump(dctx)
			dcancel()
			log = sc.stop()
			if err != nil {
				return nil, fmt.Errorf("wait for the proxy to answer istiod: %w", errors.Join(ctx.Err(), err))
			}
			t.Logf("waypoint %s: the proxy did not settle in 30 s (listeners asked: %v); judged on what it was sent", w.W.Name, r.sent[listenerType] != nil)
			sent, nacks := r.snapshot()
			return judge(sent, nacks, dump), nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	log = sc.stop()
	sent, nacks := r.snapshot()
	return judge(sent, nacks, dump), nil
}

// TestWaypointDumpDiff diffs meshlab's waypoint generator against istiod's checked-in
// dump of each waypoint scenario (testdata/waypoint/<scenario>.istiod.json), without
// starting istiod: the quick loop while writing the generator. It prints the
// differences; TestAmbientWaypointFidelity holds them to the known list.
func TestWaypointDumpDiff(t *testing.T) {
	paths, names := waypointScenarios(t)
	for i, path := range paths {
		t.Run(names[i], func(t *testing.T) {
			istiod, err := readDump(strings.TrimSuffix(path, ".yaml") + ".istiod.json")
			if err != nil {
				t.Fatal(err)
			}
			m, ws, err := loadWaypointScenario(path)
			if err != nil {
				t.Fatal(err)
			}
			enroll(m)
			if len(ws) != 1 {
				t.Skipf("the dump holds one waypoint's resources; %s declares %d", path, len(ws))
			}
			ours, err := meshlabWaypoint(m, ws[0])
			if err != nil {
				t.Fatal(err)
			}
			diffs := diffResources(istiod, ours)
			for _, d := range diffs {
				t.Log(d.String())
			}
			t.Logf("%d differences from istiod's dump", len(diffs))
		})
	}
}
