package e2e

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// Istio's docs tasks that the other e2e files do not keep, run as a learner runs them:
// Deployments naming the samples' images, the tasks' Istio objects as written, and
// `kubectl exec` as `meshlab exec`. Each test names its task and the output the task
// documents.

// execIn runs argv in a pod (a `meshlab exec` reference such as deploy/fortio) and
// returns its combined output and exit code.
func execIn(t *testing.T, labName string, flags []string, ref string, argv ...string) (string, int) {
	t.Helper()
	args := append(append([]string{"exec", "--name", labName}, flags...), append([]string{ref, "--"}, argv...)...)
	out, err := meshlab(t, args...)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out, ee.ExitCode()
	case err != nil:
		t.Fatalf("meshlab %v: %v\n%s", args, err, out)
	}
	return out, 0
}

// fortioCodes returns the "Code 200 : N (x %)" lines of a fortio load report, by code.
func fortioCodes(t *testing.T, report string) map[int]int {
	t.Helper()
	codes := map[int]int{}
	for _, m := range regexp.MustCompile(`(?m)^Code\s+(-?\d+) : (\d+) \(`).FindAllStringSubmatch(report, -1) {
		c, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		codes[c] = n
	}
	return codes
}

const circuitBreakerDR = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: httpbin
spec:
  host: httpbin
  trafficPolicy:
    connectionPool:
      tcp:
        maxConnections: 1
      http:
        http1MaxPendingRequests: 1
        maxRequestsPerConnection: 1
    outlierDetection:
      consecutive5xxErrors: 1
      interval: 1s
      baseEjectionTime: 3m
      maxEjectionPercent: 100
`

// TestCircuitBreakingTask is Istio's "Circuit Breaking" task with fortio: with the task's
// DestinationRule (one connection, one pending request), `fortio curl` gets httpbin's 200;
// `fortio load -c 2 -qps 0 -n 20` shows mostly "Code 200" with some "Code 503" (the doc:
// 17 and 3), `-c 3 -n 30` trips more (the doc: 11 and 19); the overflowed requests are the
// sidecar's `upstream_rq_pending_overflow` of cluster outbound|8000||httpbin, read with
// `pilot-agent request GET stats` in the istio-proxy container. The local 503s do not
// eject httpbin (outlier detection counts upstream answers only): 200s keep coming.
func TestCircuitBreakingTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/tasks/httpbin-fortio.yaml")
	applyYAML(t, l.name, circuitBreakerDR)

	out, code := execIn(t, l.name, []string{"-c", "fortio"}, "deploy/fortio-deploy", "/usr/bin/fortio", "curl", "-quiet", "http://httpbin:8000/get")
	if code != 0 || !strings.Contains(out, `"url": "http://httpbin:8000/get"`) || !strings.Contains(out, "HTTP/1.1 200 OK") {
		t.Fatalf("fortio curl -quiet http://httpbin:8000/get: exit %d\n%s\nwant httpbin's 200 and JSON", code, out)
	}

	// Two connections: "almost all requests made it through" (meshlab's pool lets the
	// second wait as the one pending request, where Envoy also trips a few); three trip it.
	total503 := 0
	for _, run := range []struct {
		c, n     string
		min503   int
		majority bool
	}{{"2", "20", 0, true}, {"3", "30", 1, false}} {
		out, code = execIn(t, l.name, nil, "deploy/fortio-deploy", "fortio", "load", "-c", run.c, "-qps", "0", "-n", run.n, "-loglevel", "Warning", "http://httpbin:8000/get")
		codes := fortioCodes(t, out)
		n, _ := strconv.Atoi(run.n)
		if code != 0 || codes[200] == 0 || codes[503] < run.min503 || codes[200]+codes[503] != n || (run.majority && codes[200] <= n/2) {
			t.Errorf("fortio load -c %s -n %s: exit %d, codes %v\n%s\nwant %s calls answered 200 or 503, at least %d 503s (the circuit breaker tripping), mostly 200 with 2 connections", run.c, run.n, code, codes, out, run.n, run.min503)
		}
		t.Logf("fortio load -c %s -qps 0 -n %s: %v", run.c, run.n, codes)
		total503 += codes[503]
	}

	stats, code := execIn(t, l.name, []string{"-c", "istio-proxy"}, "deploy/fortio-deploy", "pilot-agent", "request", "GET", "stats")
	if code != 0 {
		t.Fatalf("pilot-agent request GET stats: exit %d\n%s", code, stats)
	}
	const overflow = "cluster.outbound|8000||httpbin.default.svc.cluster.local.upstream_rq_pending_overflow: "
	var got int
	for line := range strings.SplitSeq(stats, "\n") {
		if v, ok := strings.CutPrefix(line, overflow); ok {
			got, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if got != total503 {
		t.Errorf("%s%d; want the %d requests fortio saw answered 503\nhttpbin pending stats:\n%s", overflow, got, total503, grepLines(stats, "httpbin", "pending"))
	}
}

// grepLines returns the lines of s containing every word, as `| grep a | grep b`.
func grepLines(s string, words ...string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		keep := true
		for _, w := range words {
			keep = keep && strings.Contains(line, w)
		}
		if keep {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

