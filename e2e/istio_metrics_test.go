package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// metricsScenario: a client (app client, v1, service account client) calls an HTTP
// server (app server, v2) and opens TCP connections to tcp-echo, all with sidecars, so
// both ends of every connection report Istio's standard metrics.
const metricsScenario = `apiVersion: v1
kind: Service
metadata: {name: server, namespace: default}
spec:
  selector: {app: server}
  ports: [{name: http, port: 8080}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: server, namespace: default}
spec:
  labels: {app: server, version: v2}
  serviceAccount: server
  ports: [8080]
  app: {}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: client, namespace: default}
spec:
  labels: {app: client, version: v1}
  serviceAccount: client
  ports: [8080]
  app: {}
---
apiVersion: v1
kind: Service
metadata: {name: tcp-echo, namespace: default}
spec:
  selector: {app: tcp-echo}
  ports: [{name: tcp, port: 9000}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: tcp-echo-v1, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: tcp-echo, version: v1}}
  template:
    metadata: {labels: {app: tcp-echo, version: v1}}
    spec:
      containers:
      - name: tcp-echo
        image: docker.io/istio/tcp-echo-server:1.3
        args: ["9000", "one"]
        ports: [{containerPort: 9000}]
`

// TestIstioStandardMetrics sends HTTP and TCP traffic between sidecars and reads Istio's
// standard metrics from both proxies' /stats/prometheus, and the merged metrics of the
// agents' status port, with the labels Istio's dashboards query: the peers learned
// through the metadata exchange (HTTP headers, and the TCP exchange over
// istio-peer-exchange), the mTLS identities, the service and the response code.
func TestIstioStandardMetrics(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	file := filepath.Join(t.TempDir(), "metrics.yaml")
	if err := os.WriteFile(file, []byte(metricsScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLab(t, file)
	const requests = 5
	for i := range requests {
		out, err := meshlab(t, "exec", "--name", l.name, "client", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "http://server:8080/")
		if err != nil || strings.TrimSpace(out) != "200" {
			t.Fatalf("request %d from client to server: %v %s", i, err, out)
		}
	}
	// The exchange headers travel between the sidecars only: the server's app answers
	// with the headers it received, the client's app sees the server sidecar's answer.
	out, err := meshlab(t, "exec", "--name", l.name, "client", "--", "curl", "-sS", "-i", "--max-time", "5", "http://server:8080/headers")
	if err != nil || strings.Contains(strings.ToLower(out), "x-envoy-peer-metadata") {
		t.Fatalf("peer metadata headers reached an app (or the request failed: %v):\n%s", err, out)
	}
	out, err = meshlab(t, "exec", "--name", l.name, "client", "--", "bash", "-c",
		`exec 3<>/dev/tcp/tcp-echo/9000 && echo hello >&3 && timeout 5 head -n1 <&3`)
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "one") {
		t.Fatalf("tcp-echo through the sidecars: %v %q", err, out)
	}

	const (
		clientSA = "spiffe://cluster.local/ns/default/sa/client"
		serverSA = "spiffe://cluster.local/ns/default/sa/server"
	)
	httpLabels := map[string]string{
		"source_workload": "client", "source_workload_namespace": "default", "source_app": "client", "source_version": "v1",
		"source_canonical_service": "client", "source_canonical_revision": "v1",
		"destination_workload": "server", "destination_workload_namespace": "default", "destination_app": "server",
		"destination_version": "v2", "destination_service": "server.default.svc.cluster.local",
		"destination_service_name": "server", "destination_service_namespace": "default",
		"destination_principal": serverSA, "request_protocol": "http", "response_code": "200", "response_flags": "-",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	// The server reports as destination, with the client's certificate and mutual_tls.
	waitMetric(t, l.name, "server", 15090, "istio_requests_total",
		with(httpLabels, "reporter", "destination", "source_principal", clientSA, "connection_security_policy", "mutual_tls"), requests)
	// The client reports as source; only the server side knows the security policy.
	waitMetric(t, l.name, "client", 15090, "istio_requests_total",
		with(httpLabels, "reporter", "source", "source_principal", clientSA, "connection_security_policy", "unknown"), requests)
	waitMetric(t, l.name, "server", 15090, "istio_request_duration_milliseconds",
		with(httpLabels, "reporter", "destination"), requests)

	tcpLabels := map[string]string{
		"source_workload": "client", "source_app": "client", "source_version": "v1",
		"destination_workload": "tcp-echo-v1", "destination_app": "tcp-echo", "destination_version": "v1",
		"destination_service_name": "tcp-echo", "request_protocol": "tcp",
	}
	echo := "deploy/tcp-echo-v1"
	waitMetric(t, l.name, echo, 15090, "istio_tcp_connections_opened_total",
		with(tcpLabels, "reporter", "destination", "source_principal", clientSA, "connection_security_policy", "mutual_tls"), 1)
	waitMetric(t, l.name, echo, 15090, "istio_tcp_connections_closed_total", with(tcpLabels, "reporter", "destination"), 1)
	waitMetric(t, l.name, echo, 15090, "istio_tcp_received_bytes_total", with(tcpLabels, "reporter", "destination"), float64(len("hello\n")))
	waitMetric(t, l.name, echo, 15090, "istio_tcp_sent_bytes_total", with(tcpLabels, "reporter", "destination"), float64(len("one hello\n")))
	waitMetric(t, l.name, "client", 15090, "istio_tcp_connections_opened_total",
		with(tcpLabels, "reporter", "source", "destination_principal", "spiffe://cluster.local/ns/default/sa/default"), 1)

	// The lab's /metrics (what a Prometheus scraping the lab sees) answers the queries of
	// Istio's docs: sum(istio_requests_total{destination_service_name="server",
	// response_code="200"}) and istio_requests_total{reporter="destination",
	// connection_security_policy="mutual_tls"}.
	labFams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	if got := counterValue(labFams["istio_requests_total"], map[string]string{"destination_service_name": "server", "response_code": "200"}); got < float64(2*requests) {
		t.Errorf(`lab /metrics: sum(istio_requests_total{destination_service_name="server",response_code="200"}) = %v; want >= %d (both reporters)`, got, 2*requests)
	}
	if got := counterValue(labFams["istio_requests_total"], map[string]string{"reporter": "destination", "connection_security_policy": "mutual_tls"}); got < float64(requests) {
		t.Errorf(`lab /metrics: istio_requests_total{reporter="destination",connection_security_policy="mutual_tls"} = %v; want >= %d`, got, requests)
	}

	// pilot-agent's merged metrics on the status port: the agent's own and the proxy's.
	fams := scrapePod(t, l.name, "server", 15020)
	for _, name := range []string{"istio_agent_scrapes_total", "istio_agent_go_goroutines", "istio_requests_total", "envoy_cluster_upstream_cx_total"} {
		if fams[name] == nil {
			t.Errorf("merged metrics on 15020 have no %s", name)
		}
	}
}

// scrapePod GETs a pod's /stats/prometheus on port (15090: the proxy, 15020: the
// agent) from inside the pod and parses it with Prometheus' own parser.
func scrapePod(t *testing.T, lab, pod string, port int) map[string]*dto.MetricFamily {
	t.Helper()
	out, err := meshlab(t, "exec", "--name", lab, pod, "--", "curl", "-sS", "--fail", "--max-time", "5",
		fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", port))
	if err != nil {
		t.Fatalf("scrape %s:%d: %v\n%s", pod, port, err, out)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse %s:%d: %v\n%s", pod, port, err, out)
	}
	return fams
}

// waitMetric polls a pod's proxy until the samples of metric with the labels of want
// add up to at least min (a counter's value, a histogram's count).
func waitMetric(t *testing.T, lab, pod string, port int, metric string, want map[string]string, atLeast float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got float64
	var fams map[string]*dto.MetricFamily
	for {
		fams = scrapePod(t, lab, pod, port)
		got = 0
		for _, m := range fams[metric].GetMetric() {
			if matches(m, want) {
				got += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
		if got >= atLeast || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var have []string
	for _, m := range fams[metric].GetMetric() {
		if matches(m, want) {
			t.Logf("%s on %s: %s", pod, metric, m.String())
		}
	}
	if got < atLeast {
		for _, m := range fams[metric].GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			have = append(have, strings.Join(ls, ","))
		}
		t.Errorf("%s on %s: %s with %v adds up to %v, want at least %v; samples:\n%s", metric, pod, metric, want, got, atLeast, strings.Join(have, "\n"))
	}
}
