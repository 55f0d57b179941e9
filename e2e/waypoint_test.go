package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestWaypointApplyListStatus runs Istio's ambient Getting Started's waypoint step on a
// running ambient lab with meshlab's words for istioctl's: `waypoint apply
// --enroll-namespace --wait` makes the waypoint's Gateway, waits until its pod is ready
// (Programmed) and labels the namespace; list, status and get gateway show it as istioctl
// and kubectl do; ztunnel is told the namespace's Service uses it (WDS); delete removes
// it and its pod.
func TestWaypointApplyListStatus(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/ambient-waypoint.yaml")
	run := func(args ...string) string {
		t.Helper()
		out, err := meshlab(t, append(args, "--lab", l.name)...)
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := run("waypoint", "apply", "--enroll-namespace", "--wait")
	want := "✅ waypoint default/waypoint applied\n✅ waypoint default/waypoint is ready!\n✅ namespace default labeled with \"istio.io/use-waypoint: waypoint\"\n"
	if out != want {
		t.Fatalf("waypoint apply: got\n%s\nwant\n%s", out, want)
	}
	if out := run("waypoint", "list"); !regexp.MustCompile(`(?m)^NAME\s+REVISION\s+TRAFFIC TYPE\s+PROGRAMMED\n^waypoint\s+default\s+none\s+True\s*$`).MatchString(out) {
		t.Errorf("waypoint list:\n%s", out)
	}
	if out := run("waypoint", "status"); !regexp.MustCompile(`(?m)^waypoint\s+True\s+Programmed\s+Programmed\s+Resource programmed, assigned to service\(s\) waypoint\.default\.svc\.cluster\.local:15008\s*$`).MatchString(out) {
		t.Errorf("waypoint status:\n%s", out)
	}
	if out := run("get", "gateway"); !regexp.MustCompile(`(?m)^waypoint\s+istio-waypoint\s+10\.96\.\d+\.\d+\s+True\s`).MatchString(out) {
		t.Errorf("get gateway:\n%s", out)
	}
	if out := run("label", "namespace", "default", "--list"); !strings.Contains(out, "istio.io/use-waypoint=waypoint") {
		t.Errorf("namespace labels:\n%s", out)
	}
	// ztunnel learns from WDS that the curl Service goes through the waypoint.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := run("ztunnel-config", "services")
		if regexp.MustCompile(`(?m)^default\s+curl\s+\S+\s+waypoint\s`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ztunnel-config services never showed the curl Service's waypoint:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if out := run("waypoint", "delete", "waypoint"); out != "waypoint default/waypoint deleted\n" {
		t.Errorf("waypoint delete: %q", out)
	}
	if out := run("waypoint", "list"); out != "No waypoints found.\n" {
		t.Errorf("waypoint list after delete:\n%s", out)
	}
	if out := run("get", "pods"); strings.Contains(out, "waypoint-") {
		t.Errorf("the waypoint's pod outlived it:\n%s", out)
	}
}
