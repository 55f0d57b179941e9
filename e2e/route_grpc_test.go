package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestRouteGRPCWaypoint routes gRPC calls in ambient with GRPCRoutes whose parent is a
// Service (GAMMA): a client in an ambient namespace calls the echo Service (the grpc-echo
// persona, two versions) over plaintext gRPC; its ztunnel sends the calls to the
// namespace's waypoint, which routes them by the route. A method match sends every
// Check to echo-v2 (without the route the calls spread over both); a second route
// splits them 80/20 between echo-v1 and echo-v2. The answers say which pod served.
func TestRouteGRPCWaypoint(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/route-grpc-waypoint.yaml")
	bin := meshlabBin(t)
	answer := regexp.MustCompile(`(?m)^code=OK pod=(echo-v[12])-[a-z0-9]+-[a-z0-9]{5} peer=`)
	// calls makes n calls and counts the answers by version.
	calls := func(n string) (map[string]int, string) {
		t.Helper()
		out, _ := meshlab(t, "exec", "--name", l.name, "deploy/grpc-client", "--", bin, "app", "grpc-call",
			"--plaintext", "--timeout", "20s", "-n", n, "echo.default.svc.cluster.local:7070")
		got := map[string]int{}
		for _, m := range answer.FindAllStringSubmatch(out, -1) {
			got[m[1]]++
		}
		return got, out
	}
	// until polls calls until ok holds (a route reaches the waypoint a moment after
	// apply returns on a loaded machine).
	until := func(what, n string, ok func(map[string]int) bool) map[string]int {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		for {
			got, out := calls(n)
			if ok(got) {
				t.Logf("%s: %v", what, got)
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: answers %v\n%s", what, got, lastLines(out, 5))
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	apply := func(file string) {
		t.Helper()
		if out, err := meshlab(t, "apply", "--wait", "--timeout", "30s", "--name", l.name, "-f", file); err != nil {
			t.Fatalf("apply %s: %v\n%s", file, err, out)
		}
	}

	until("no route", "40", func(got map[string]int) bool { return got["echo-v1"] > 0 && got["echo-v2"] > 0 })

	apply("testdata/route-grpc-method.yaml")
	until("Check to echo-v2", "20", func(got map[string]int) bool { return got["echo-v2"] == 20 })

	apply("testdata/route-grpc-split.yaml")
	got := until("80/20", "200", func(got map[string]int) bool {
		return got["echo-v1"]+got["echo-v2"] == 200 && got["echo-v1"] >= 140 && got["echo-v1"] <= 185
	})
	if got["echo-v2"] == 0 {
		t.Errorf("80/20: answers %v, want some from echo-v2", got)
	}

	// The waypoint's route counted them: its stats name the route's clusters.
	wp, _, _ := ambientPodOf(t, l.name, "waypoint-")
	out, err := meshlab(t, "exec", "--name", l.name, wp, "--", "curl", "-sS", "--max-time", "5",
		"http://127.0.0.1:15000/stats?filter=upstream_rq_total")
	if err != nil {
		t.Fatalf("stats of %s: %v\n%s", wp, err, out)
	}
	if !strings.Contains(out, "echo-v2.default.svc.cluster.local") || !strings.Contains(out, "echo-v1.default.svc.cluster.local") {
		t.Errorf("the waypoint's stats name no echo-v1/echo-v2 cluster:\n%s", out)
	}
}
