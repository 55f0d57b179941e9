package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsQueryingMetricsTask walks istio.io's "Querying Metrics from Prometheus" as far as
// a lab goes, on Istio's sample files, each command changed only from kubectl/istioctl to
// meshlab: Bookinfo and samples/addons/prometheus.yaml applied, `get svc prometheus -n
// istio-system` in kubectl's columns, traffic to the product page (from the ratings pod,
// as Getting Started sends it when no ingress is set up), then `dashboard prometheus`
// printing istioctl's URL line. A lab runs no Prometheus server, so the page's PromQL
// queries have no engine: the dashboard serves the lab's merged metrics instead, and the
// test reads the first query's series there (istio_requests_total for
// productpage.default.svc.cluster.local, reported by the destination).
func TestDocsQueryingMetricsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	l, run := startTaskLab(t)
	run("label", "namespace", "default", "istio-injection=enabled")
	run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	if out := run("apply", "-f", filepath.Join(samples, "addons/prometheus.yaml")); !strings.Contains(out, "service/prometheus created\n") || !strings.Contains(out, "deployment.apps/prometheus created\n") {
		t.Errorf("apply samples/addons/prometheus.yaml:\n%s", out)
	}
	svc := strings.Fields(strings.Split(run("-n", "istio-system", "get", "svc", "prometheus"), "\n")[1])
	if len(svc) != 6 || svc[0] != "prometheus" || svc[1] != "ClusterIP" || svc[3] != "<none>" || svc[4] != "9090/TCP" {
		t.Errorf("get svc prometheus -n istio-system: %v; want prometheus ClusterIP <ip> <none> 9090/TCP <age>", svc)
	}

	// Traffic to the product page, until it answers with its title.
	deadline := time.Now().Add(45 * time.Second)
	for {
		ratings, _ := meshlab(t, "--lab", l.name, "get", "pod", "-l", "app=ratings", "-o", "jsonpath={.items[0].metadata.name}")
		out, err := meshlab(t, "--lab", l.name, "exec", strings.TrimSpace(ratings), "-c", "ratings", "--", "curl", "-sS", "productpage:9080/productpage")
		if err == nil && strings.Contains(out, "<title>Simple Bookstore App</title>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl productpage:9080/productpage from the ratings pod: %v\n%s", err, out)
		}
		time.Sleep(time.Second)
	}

	cmd := exec.Command(meshlabBin(t), "--lab", l.name, "dashboard", "prometheus")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://localhost:") {
		t.Fatalf("dashboard prometheus printed %q (%v); want istioctl's http://localhost:PORT", line, err)
	}
	url := strings.TrimSpace(line) + "/metrics"

	// The first query of the page: istio_requests_total{destination_service="productpage.default.svc.cluster.local"}.
	const series = `destination_service="productpage.default.svc.cluster.local"`
	deadline = time.Now().Add(30 * time.Second)
	for {
		body, err := getBody(url)
		found := false
		for l := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(l, "istio_requests_total{") && strings.Contains(l, series) && strings.Contains(l, `reporter="destination"`) && strings.Contains(l, `response_code="200"`) {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v; no istio_requests_total series with %s reported by the destination in:\n%.3000s", url, err, series, body)
		}
		time.Sleep(time.Second)
	}
}

// getBody GETs url and returns its body.
func getBody(url string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
