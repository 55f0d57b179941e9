package runner

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

const ambientRunnerLab = `apiVersion: meshlab.dev/v1alpha1
kind: Lab
metadata: {name: a}
spec:
  title: ambient
  steps:
    - name: enroll
      instructions: label the namespace
      solution:
        - label: {namespace: default, labels: {istio.io/dataplane-mode: ambient}}
      verify:
        - traffic: {from: client, url: "http://server:8080/", count: 2}
      checks:
        - hbone: {from: client, to: server}
---
apiVersion: v1
kind: Service
metadata: {name: server}
spec:
  selector: {app: server}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: server, labels: {app: server}}
spec:
  containers: [{name: server, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec:
  containers: [{name: client, image: curlimages/curl, command: ["/bin/sleep", "infinity"]}]
`

// ztunnel's metrics and log lines as it writes them for one HBONE connection client ->
// server, and for one it carried in plaintext.
const (
	ztunnelMetrics = `# HELP istio_tcp_connections_opened The total number of TCP connections opened.
# TYPE istio_tcp_connections_opened counter
istio_tcp_connections_opened_total{reporter="destination",source_workload="client",destination_workload="server",connection_security_policy="mutual_tls"} 2
istio_tcp_connections_opened_total{reporter="source",source_workload="client",destination_workload="server",connection_security_policy="unknown"} 2
`
	ztunnelLog = "2026-11-28T17:00:00.000000Z\tinfo\taccess\tconnection complete\tsrc.addr=10.0.0.2:4000 src.workload=\"client\" dst.addr=10.0.0.3:15008 dst.hbone_addr=10.0.0.3:8080 dst.workload=\"server\" direction=\"inbound\" bytes_sent=10 bytes_recv=10 duration=\"1ms\"\n" +
		"2026-11-28T17:00:00.000000Z\terror\taccess\tconnection complete\tsrc.addr=10.0.0.2:4001 src.workload=\"client\" dst.addr=10.0.0.3:8080 dst.workload=\"server\" direction=\"outbound\" bytes_sent=0 bytes_recv=0 duration=\"1ms\" error=\"connection reset\"\n"
)

// hboneFailed is ztunnel's line of an HBONE connection whose destination could not reach
// the app.
const hboneFailed = "2026-11-28T17:00:00.000000Z\terror\taccess\tconnection complete\tsrc.addr=10.0.0.2:4002 src.workload=\"client\" dst.addr=10.0.0.3:15008 dst.hbone_addr=10.0.0.3:8080 dst.workload=\"server\" direction=\"inbound\" bytes_sent=0 bytes_recv=0 duration=\"1ms\" error=\"connect: connection refused\"\n"

// TestHBONECheck passes on ztunnel's own account of an HBONE edge and fails, saying what
// it saw, without ztunnel or without the edge in its metrics or its log.
func TestHBONECheck(t *testing.T) {
	l, err := Parse("a.yaml", []byte(ambientRunnerLab), Sources{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		metrics, log string
		pass         bool
		saw          string
	}{
		{"no ztunnel", "", "", false, "no ztunnel"},
		{"hbone", ztunnelMetrics, ztunnelLog, true, "2 connections opened over mutual_tls in ztunnel's metrics, 1 connection complete lines over HBONE in its log (dst.hbone_addr=10.0.0.3:8080)"},
		{"plaintext only", strings.ReplaceAll(ztunnelMetrics, "mutual_tls", "unknown"), ztunnelLog, false, "0 connections opened"},
		{"not in the log", ztunnelMetrics, strings.SplitAfter(ztunnelLog, "\n")[1], false, "0 connection complete lines"},
		// The tunnel reached the destination, whose dial of the app failed: the check
		// says so (the lab's log is gone once the lab failed).
		{"failed in the tunnel", ztunnelMetrics, strings.SplitAfter(ztunnelLog, "\n")[1] + hboneFailed, false,
			`0 connection complete lines over HBONE in its log, and 1 that failed (the last: inbound error="connect: connection refused")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{}
			if tc.metrics != "" {
				f.zMetrics, f.zLog = []byte(tc.metrics), []byte(tc.log)
			}
			r := &Runner{Backend: f, Logger: testutil.Logger(t)}
			res := r.Check(t.Context(), l, 0, nil)
			if len(res) != 1 || res[0].Passed != tc.pass || !strings.Contains(res[0].Saw, tc.saw) || res[0].Hint == "" {
				t.Fatalf("hbone check = %+v; want passed %v, saw containing %q", res, tc.pass, tc.saw)
			}
		})
	}
}

// TestLabelAction renders a label action as `meshlab label namespace` and applies the
// namespace with its labels; a namespace the lab declares with labels is refused.
func TestLabelAction(t *testing.T) {
	l, err := Parse("a.yaml", []byte(ambientRunnerLab), Sources{})
	if err != nil {
		t.Fatal(err)
	}
	tasks := Tasks(l, 0)
	if len(tasks) != 1 || tasks[0].Command != "meshlab label namespace default istio.io/dataplane-mode=ambient" {
		t.Fatalf("tasks %+v", tasks)
	}
	f := &fakeBackend{}
	r := &Runner{Backend: f, Logger: testutil.Logger(t)}
	_ = r.RunStep(t.Context(), l, 0, l.Steps[0].Solution)
	if len(f.applied) != 1 || !strings.Contains(f.applied[0], `"kind":"Namespace"`) || !strings.Contains(f.applied[0], `"istio.io/dataplane-mode":"ambient"`) {
		t.Fatalf("applied %q; want the labelled namespace", f.applied)
	}
	declared := strings.Replace(ambientRunnerLab, "---\napiVersion: v1\nkind: Service", "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {team: a}}\n---\napiVersion: v1\nkind: Service", 1)
	if _, err := Parse("a.yaml", []byte(declared), Sources{}); err == nil || !strings.Contains(err.Error(), "label a namespace it does not declare") {
		t.Fatalf("a label action on a declared namespace: %v", err)
	}
}
