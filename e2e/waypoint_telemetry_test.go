package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestWaypointStatsFollowTelemetry: a Telemetry's metrics overrides reach the waypoint
// as istiod applies them (the root namespace's namespace-wide Telemetry, the server
// mode): after the customize-metrics page's override (request_host and destination_port
// on REQUEST_COUNT) is applied in istio-system, requests through the waypoint show in
// `istioctl x es <waypoint> -o prom` as istio_requests_total with reporter="waypoint"
// and the two tags; a CLIENT-only override (a tag only sidecars' outbound side gets) does
// not reach it. Before, a waypoint's istio.stats ignored every Telemetry.
func TestWaypointStatsFollowTelemetry(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/ambient-waypoint-traffic.yaml")
	wp, _, _ := ambientPodOf(t, l.name, "waypoint-")
	eventually(t, l.name, "httpbin's /get through the waypoint", statusLine(`"url"`), "-s", "http://httpbin:8000/get")

	applyYAML(t, l.name, `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  metrics:
  - providers:
    - name: prometheus
    overrides:
    - match:
        metric: REQUEST_COUNT
      tagOverrides:
        destination_port:
          value: "string(destination.port)"
        request_host:
          value: "request.host"
    - match:
        metric: REQUEST_COUNT
        mode: CLIENT
      tagOverrides:
        client_only:
          value: "'yes'"
`)
	want := []string{`reporter="waypoint"`, `source_workload="curl"`, `destination_workload="httpbin"`,
		`destination_service="httpbin.default.svc.cluster.local"`, `response_code="200"`,
		`destination_port="`, `request_host="httpbin:8000"`}
	deadline := time.Now().Add(45 * time.Second)
	var out string
	for {
		curlIn(t, l.name, "-s", "-o", "/dev/null", "http://httpbin:8000/get")
		var err error
		out, err = meshlab(t, "--lab", l.name, "x", "es", wp, "-o", "prom")
		if err == nil && len(seriesWith(out, want...)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("x es %s -o prom: no istio_requests_total with %v within 45 s (%v); its series:\n%s", wp, want, err, strings.Join(seriesWith(out), "\n"))
		}
		time.Sleep(time.Second)
	}
	t.Logf("the waypoint's series: %s", strings.Join(seriesWith(out, want...), "\n"))
	if s := seriesWith(out, "client_only"); len(s) != 0 {
		t.Errorf("a CLIENT-mode override reached the waypoint (istiod gives it the server mode's):\n%s", strings.Join(s, "\n"))
	}
}
