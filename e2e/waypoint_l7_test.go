package e2e

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestWaypointL7 sends requests from an ambient pod to a Service whose waypoint applies
// L7 config: the HTTPRoute with httpbin's Service as parent (GAMMA) sets a request header
// that httpbin echoes, and the AuthorizationPolicy attached to the Service by targetRefs
// denies DELETE with the waypoint's "RBAC: access denied" while GET passes.
func TestWaypointL7(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/ambient-waypoint-l7.yaml")
	r := eventually(t, l.name, "the HTTPRoute's header echoed by httpbin", statusLine("gamma"),
		"-s", "http://httpbin:8000/headers")
	if !strings.Contains(strings.ToLower(r.out), "x-routed-by") {
		t.Errorf("httpbin's /headers through the waypoint lacks X-Routed-By:\n%s", r.out)
	}
	d := eventually(t, l.name, "403 RBAC: access denied for DELETE", func(r curlResult) bool {
		return r.code == 0 && strings.Contains(r.out, "403") && strings.Contains(r.out, "RBAC: access denied")
	}, "-s", "-X", "DELETE", "-w", "\n%{http_code}\n", "http://httpbin:8000/delete")
	t.Logf("DELETE through the waypoint: %s", strings.ReplaceAll(strings.TrimSpace(d.out), "\n", " | "))
	g := curlIn(t, l.name, "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://httpbin:8000/get")
	if strings.TrimSpace(g.out) != "200" {
		t.Errorf("GET through the waypoint: %q, want 200 (the policy denies DELETE only)", g.out)
	}
}
