package e2e

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestRequestTimeoutsTask is Istio's "Request Timeouts" task on Bookinfo: with every
// service on v1, reviews on v2 and a 2 s delay on ratings, the page shows reviews (black
// stars) after about 2 s; with the task's 0.5 s timeout on reviews, the page comes back
// in about 1 s (productpage tries reviews twice) saying "Sorry, product reviews are
// currently unavailable for this book."
func TestRequestTimeoutsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-bookinfo.yaml")
	applyYAML(t, l.name, bookinfoSubsets+`---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
    - reviews
  http:
  - route:
    - destination:
        host: reviews
        subset: v2
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ratings
spec:
  hosts:
  - ratings
  http:
  - fault:
      delay:
        percentage:
          value: 100
        fixedDelay: 2s
    route:
    - destination:
        host: ratings
        subset: v1
`)
	// page fetches the product page and says how long the request took as curl timed it
	// in the pod (time_total), not counting the start of exec and curl, which a loaded
	// machine (the whole e2e suite at once) stretches by a second or more.
	page := func() (string, time.Duration) {
		t.Helper()
		out, code := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "--max-time", "15", "-w", "\n%{time_total}", "http://productpage:9080/productpage")
		i := strings.LastIndex(out, "\n")
		body, total := out[:max(i, 0)], out[i+1:]
		secs, err := strconv.ParseFloat(strings.TrimSpace(total), 64)
		if code != 0 || err != nil || !strings.Contains(body, "<title>Simple Bookstore App</title>") {
			t.Fatalf("GET /productpage: exit %d (time_total %q: %v)\n%s", code, total, err, out)
		}
		return body, time.Duration(secs * float64(time.Second))
	}
	waitFor := func(what string, ok func(string, time.Duration) bool) (string, time.Duration) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			p, took := page()
			if ok(p, took) {
				return p, took
			}
			if time.Now().After(deadline) {
				t.Fatalf("20 s after apply, the page (in %v) is not %s:\n%s", took, what, p)
			}
		}
	}
	_, took := waitFor("reviews v2 after the 2 s ratings delay", func(p string, took time.Duration) bool {
		return strings.Contains(p, `color="black"`) && took >= 2*time.Second
	})
	if took > 3500*time.Millisecond {
		t.Errorf("with a 2 s ratings delay the page took %v; want about 2 s", took)
	}

	applyYAML(t, l.name, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
  - reviews
  http:
  - route:
    - destination:
        host: reviews
        subset: v2
    timeout: 0.5s
`)
	_, took = waitFor("reviews unavailable", func(p string, _ time.Duration) bool {
		return strings.Contains(p, "Sorry, product reviews are currently unavailable for this book.")
	})
	// productpage's two attempts at reviews, 0.5 s each.
	if took < 900*time.Millisecond || took > 1900*time.Millisecond {
		t.Errorf("with reviews' 0.5 s timeout the page took %v; want about 1 s (two attempts)", took)
	}
}

// bookinfoSubsets is samples/bookinfo/networking/destination-rule-all.yaml's form: a
// subset per version of each service.
const bookinfoSubsets = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: productpage
spec:
  host: productpage
  subsets:
  - name: v1
    labels:
      version: v1
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
spec:
  host: reviews
  subsets:
  - name: v1
    labels:
      version: v1
  - name: v2
    labels:
      version: v2
  - name: v3
    labels:
      version: v3
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: ratings
spec:
  host: ratings
  subsets:
  - name: v1
    labels:
      version: v1
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: details
spec:
  host: details
  subsets:
  - name: v1
    labels:
      version: v1
`

// TestMirroringTask is Istio's "Mirroring" task: with all traffic routed to httpbin v1,
// `curl http://httpbin:8000/headers` shows up in v1's log only; with the task's mirror to
// v2 (mirrorPercentage 100) the same request also shows up in v2's log, sent fire and
// forget by the client's sidecar with the authority httpbin-shadow:8000 (v2's sidecar
// access log), while the client still gets v1's answer.
func TestMirroringTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/tasks/mirroring.yaml")
	const route = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: httpbin
spec:
  hosts:
    - httpbin
  http:
  - route:
    - destination:
        host: httpbin
        subset: v1
      weight: 100
`
	applyYAML(t, l.name, route+`---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: httpbin
spec:
  host: httpbin
  subsets:
  - name: v1
    labels:
      version: v1
  - name: v2
    labels:
      version: v2
`)
	podOf := func(prefix string) string {
		t.Helper()
		out, code := execIn(t, l.name, nil, "deploy/"+prefix, "hostname")
		if code != 0 {
			t.Fatalf("hostname in deploy/%s: exit %d\n%s", prefix, code, out)
		}
		return strings.TrimSpace(out)
	}
	v1, v2 := podOf("httpbin-v1"), podOf("httpbin-v2")
	logCount := func(pod, container, what string) int {
		t.Helper()
		out, err := meshlab(t, "logs", "--name", l.name, pod, "-c", container)
		if err != nil {
			t.Fatalf("meshlab logs %s -c %s: %v\n%s", pod, container, err, out)
		}
		return strings.Count(out, what)
	}
	const get = `"GET /headers HTTP/1.1" 200`
	// Until the route reaches the client's sidecar, requests may land on v2: wait for v1
	// to take ten in a row, then count.
	for inARow := 0; inARow < 10; {
		before := logCount(v1, "app", get)
		if out, code := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "http://httpbin:8000/headers"); code != 0 {
			t.Fatalf("curl /headers: exit %d\n%s", code, out)
		}
		if logCount(v1, "app", get) > before {
			inARow++
		} else {
			inARow = 0
		}
	}
	v2Before := logCount(v2, "app", get)
	for range 3 {
		execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "http://httpbin:8000/headers")
	}
	if n := logCount(v2, "app", get); n != v2Before {
		t.Errorf("without a mirror httpbin v2 logged %d more requests; want none", n-v2Before)
	}

	applyYAML(t, l.name, route+`    mirror:
      host: httpbin
      subset: v2
    mirrorPercentage:
      value: 100.0
`)
	deadline := time.Now().Add(20 * time.Second)
	for logCount(v2, "app", get) == v2Before {
		if time.Now().After(deadline) {
			t.Fatal("20 s after the mirror, httpbin v2 has logged no mirrored GET /headers")
		}
		out, _ := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "http://httpbin:8000/headers")
		if !strings.Contains(out, `"Host": "httpbin:8000"`) {
			t.Errorf("the client got %s; want v1's answer for Host httpbin:8000", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := logCount(v2, "proxy", "httpbin-shadow:8000"); n == 0 {
		out, _ := meshlab(t, "logs", "--name", l.name, v2, "-c", "proxy")
		t.Errorf("v2's sidecar access log has no request for authority httpbin-shadow:8000:\n%s", out)
	}
}
