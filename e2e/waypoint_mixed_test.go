package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestWaypointToNonAmbientEndpoints: a namespace waypoint in front of a Service whose
// endpoints are an ambient pod, a pod out of the mesh (dataplane-mode none) and a
// sidecar pod. The waypoint reaches each as istiod's endpoints tell it (HBONE to the
// ambient pod only, plaintext to the others): every request through the waypoint is
// answered 200 by one of the three, and each of them answers; dialled over HBONE, the
// two without ztunnel answered 503 UC.
func TestWaypointToNonAmbientEndpoints(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/ambient-waypoint-mixed.yaml")
	wp, _, wpIP := ambientPodOf(t, l.name, "waypoint-")
	type echo struct{ name, netns string }
	var echos []echo
	for _, prefix := range []string{"echo-ambient-", "echo-none-", "echo-sidecar-"} {
		name, ns, _ := ambientPodOf(t, l.name, prefix)
		// Count what arrives from the waypoint on the wire: HBONE (15008) or the app's
		// port in plaintext (8080).
		countArrivals(t, ns, wpIP, "15008", "8080")
		echos = append(echos, echo{name, ns})
	}
	eventually(t, l.name, "echo's /get through the waypoint", statusLine(`"url"`), "-s", "http://echo:8000/get")
	const requests = 15
	for n := range requests {
		r := curlIn(t, l.name, "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://echo:8000/get")
		if r.code != 0 || strings.TrimSpace(r.out) != "200" {
			t.Fatalf("request %d through the waypoint: curl exit %d, status %q; want 200", n, r.code, r.out)
		}
	}
	// Least-request over three endpoints leaves each some of the requests; a pod
	// without ztunnel is reached on 8080, never on 15008.
	deadline := time.Now().Add(30 * time.Second)
	for _, e := range echos {
		hbone, plain := packets(t, e.netns, "e2e-15008"), packets(t, e.netns, "e2e-8080")
		for hbone+plain == 0 && time.Now().Before(deadline) {
			curlIn(t, l.name, "-s", "-o", "/dev/null", "http://echo:8000/get")
			hbone, plain = packets(t, e.netns, "e2e-15008"), packets(t, e.netns, "e2e-8080")
		}
		t.Logf("%s: %d packets from the waypoint on 15008, %d on 8080", e.name, hbone, plain)
		ambient := strings.HasPrefix(e.name, "echo-ambient-")
		switch {
		case hbone+plain == 0:
			t.Errorf("%s: no request of the waypoint reached it", e.name)
		case ambient && plain != 0:
			t.Errorf("%s (ambient): %d packets from the waypoint on 8080 in plaintext; want HBONE only", e.name, plain)
		case !ambient && hbone != 0:
			t.Errorf("%s (no ztunnel): %d packets from the waypoint on 15008 (HBONE); want plaintext on 8080", e.name, hbone)
		}
	}
	// The waypoint reported every answer (reporter waypoint), each 200.
	waitMetric(t, l.name, wp, 15020, "istio_requests_total", map[string]string{
		"reporter": "waypoint", "destination_service": "echo.default.svc.cluster.local", "response_code": "200",
	}, requests)
}
