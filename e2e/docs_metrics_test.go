package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsQueryingMetricsTask walks istio.io's "Querying Metrics from Prometheus" on
// Istio's sample files, each command changed only from kubectl/istioctl to meshlab:
// Bookinfo and samples/addons/prometheus.yaml applied (the addon's pod runs Debian's
// prometheus on the addon's own configuration), `get svc prometheus -n istio-system` in
// kubectl's columns, traffic to the product page (from the ratings pod, as Getting
// Started sends it when no ingress is set up), `dashboard prometheus` printing istioctl's
// URL line, then the page's four PromQL queries answered by that Prometheus through the
// dashboard, from what it scraped of the sidecars' merged metrics (15020) as the addon's
// kubernetes-pods job does.
func TestDocsQueryingMetricsTask(t *testing.T) {
	testutil.RequireRoot(t)
	requirePrometheus(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	l, run := startTaskLab(t)
	start := time.Now()
	run("label", "namespace", "default", "istio-injection=enabled")
	// The addon first: its scrapes (every 15 s) start while Bookinfo comes up.
	if out := run("apply", "-f", filepath.Join(samples, "addons/prometheus.yaml")); !strings.Contains(out, "service/prometheus created\n") || !strings.Contains(out, "deployment.apps/prometheus created\n") {
		t.Errorf("apply samples/addons/prometheus.yaml:\n%s", out)
	}
	run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	svc := strings.Fields(strings.Split(run("-n", "istio-system", "get", "svc", "prometheus"), "\n")[1])
	if len(svc) != 6 || svc[0] != "prometheus" || svc[1] != "ClusterIP" || svc[3] != "<none>" || svc[4] != "9090/TCP" {
		t.Errorf("get svc prometheus -n istio-system: %v; want prometheus ClusterIP <ip> <none> 9090/TCP <age>", svc)
	}

	// Traffic to the product page, until it answers with its title, then a few more
	// calls so that reviews v3 is among the versions called.
	ratings := strings.TrimSpace(run("get", "pod", "-l", "app=ratings", "-o", "jsonpath={.items[0].metadata.name}"))
	curl := func() (string, error) {
		return meshlab(t, "--lab", l.name, "exec", ratings, "-c", "ratings", "--", "curl", "-sS", "productpage:9080/productpage")
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		out, err := curl()
		if err == nil && strings.Contains(out, "<title>Simple Bookstore App</title>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl productpage:9080/productpage from the ratings pod: %v\n%s", err, out)
		}
		time.Sleep(time.Second)
	}
	// Enough requests that each reviews version serves some: the page's v3 query finds
	// no series when the proxies' random choice skipped v3 ((2/3)^6: 9 % of runs with
	// 5; (2/3)^21 with 20).
	for range 20 {
		if out, err := curl(); err != nil {
			t.Fatalf("curl productpage:9080/productpage: %v\n%s", err, out)
		}
	}

	t.Logf("%v: traffic sent", time.Since(start).Round(time.Millisecond))
	url := dashboardPrometheus(t, l.name)
	// The page's queries, each polled until Prometheus' scrapes (every 15 s) answer it:
	// the product page's count as its own sidecar reports it, scraped by the addon's
	// kubernetes-pods job; the rate needs two scrapes of the series.
	fromProductPage := func(m map[string]string) bool {
		return m["reporter"] == "destination" && m["response_code"] == "200" && m["destination_workload"] == "productpage-v1" &&
			m["job"] == "kubernetes-pods" && m["namespace"] == "default" && strings.HasPrefix(m["pod"], "productpage-v1-")
	}
	anySeries := func(map[string]string) bool { return true }
	for _, q := range []struct {
		query string
		want  func(map[string]string) bool
	}{
		{`istio_requests_total`, anySeries},
		{`istio_requests_total{destination_service="productpage.default.svc.cluster.local"}`, fromProductPage},
		{`istio_requests_total{destination_service="reviews.default.svc.cluster.local", destination_version="v3"}`, anySeries},
		{`rate(istio_requests_total{destination_service=~"productpage.*", response_code="200"}[5m])`, anySeries},
	} {
		n := pollPromQL(t, url, q.query, q.want, 50*time.Second)
		t.Logf("%v: %s: %d series", time.Since(start).Round(time.Millisecond), q.query, n)
	}
}

// requirePrometheus skips the test without Debian's prometheus (which `make prometheus`
// installs, and `make test` runs), and fails it when CI=true.
func requirePrometheus(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("prometheus"); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs Debian's prometheus and CI=true: run `sudo make prometheus` (make test does)")
	}
	t.Skip("skipped: this test needs Debian's prometheus (sudo make prometheus)")
}

// dashboardPrometheus runs `meshlab dashboard prometheus` until the test ends and
// returns the URL it prints (istioctl's line).
func dashboardPrometheus(t *testing.T, lab string) string {
	t.Helper()
	cmd := exec.Command(meshlabBin(t), "--lab", lab, "dashboard", "prometheus")
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
	return strings.TrimSpace(line)
}

// pollPromQL asks the Prometheus at url for the instant query q until a series of its
// answer satisfies want, and returns how many series it answered.
func pollPromQL(t *testing.T, url, q string, want func(map[string]string) bool, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		body, err := getBody(url + "/api/v1/query?query=" + neturl.QueryEscape(q))
		var ans struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		if err == nil {
			err = json.Unmarshal([]byte(body), &ans)
		}
		for _, r := range ans.Data.Result {
			if ans.Status == "success" && want(r.Metric) {
				return len(ans.Data.Result)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("PromQL %s at %s: %v; not the series wanted in:\n%.3000s", q, url, err, body)
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
