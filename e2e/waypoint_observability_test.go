package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestWaypointObservability is the L7 observability of Istio's ambient docs: in an
// ambient namespace whose Services use a waypoint, requests from curl to httpbin go
// through the waypoint, and the waypoint's proxy reports them in its merged metrics
// (what the docs read with `kubectl exec deploy/waypoint -- curl localhost:15020/stats/prometheus`)
// as istio_requests_total with reporter="waypoint": the client and the destination
// workloads as the waypoint learned them from WDS, the principals of the HBONE
// connection and the destination's identity, the Service from its cluster. Then the
// Access Logs task's Telemetry (mesh-default in istio-system, provider envoy) turns the
// waypoint's access log on: `logs <waypoint pod>` shows the request's line in Istio's
// TEXT format, with the waypoint's inbound-vip cluster as its upstream.
func TestWaypointObservability(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/ambient-waypoint-traffic.yaml")
	wp, _, _ := ambientPodOf(t, l.name, "waypoint-")
	eventually(t, l.name, "httpbin's /get through the waypoint", statusLine(`"url"`), "-s", "http://httpbin:8000/get")
	curlIn(t, l.name, "-s", "-o", "/dev/null", "http://httpbin:8000/status/418")

	waypoint := map[string]string{
		"reporter":                       "waypoint",
		"source_workload":                "curl",
		"source_workload_namespace":      "default",
		"source_principal":               "spiffe://cluster.local/ns/default/sa/curl",
		"source_canonical_service":       "curl",
		"destination_workload":           "httpbin",
		"destination_workload_namespace": "default",
		"destination_principal":          "spiffe://cluster.local/ns/default/sa/httpbin",
		"destination_canonical_service":  "httpbin",
		"destination_service":            "httpbin.default.svc.cluster.local",
		"destination_service_name":       "httpbin",
		"destination_service_namespace":  "default",
		"request_protocol":               "http",
		"connection_security_policy":     "mutual_tls",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range waypoint {
			m[k] = v
		}
		return m
	}
	waitMetric(t, l.name, wp, 15020, "istio_requests_total", with("response_code", "200"), 1)
	waitMetric(t, l.name, wp, 15020, "istio_requests_total", with("response_code", "418"), 1)
	waitMetric(t, l.name, wp, 15020, "istio_request_duration_milliseconds", with("response_code", "418"), 1)

	// The waypoint's access log, from the Telemetry API.
	applyYAML(t, l.name, telemetryMeshDefault) // docs_accesslog_test.go
	const want = `"GET /status/418 HTTP/1.1" 418 `
	deadline := time.Now().Add(45 * time.Second)
	var line string
	for line == "" {
		curlIn(t, l.name, "-s", "-o", "/dev/null", "http://httpbin:8000/status/418")
		out, err := meshlab(t, "--lab", l.name, "logs", wp)
		for _, ln := range strings.Split(out, "\n") {
			if err == nil && strings.Contains(ln, want) {
				line = ln
			}
		}
		if line == "" && time.Now().After(deadline) {
			t.Fatalf("logs %s: no access log line %q within 45 s; last (%v):\n%s", wp, want, err, out)
		}
		if line == "" {
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("the waypoint's access log line: %s", line)
	for _, w := range []string{" inbound-vip|8000|http|httpbin.default.svc.cluster.local ", `"httpbin:8000"`, `"curl/`} {
		if !strings.Contains(line, w) {
			t.Errorf("the waypoint's access log line\n%s\nholds no %q", line, w)
		}
	}
}
