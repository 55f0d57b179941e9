package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/statstext"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// The tests in this file prove issue 6's traffic management on real traffic: each brings
// up its own lab, applies Istio objects live, sends requests from inside the client pod's
// namespace (so its sidecar captures them like the app's own) and reads the client
// sidecar's Envoy stats.

// TestFaultDelay: a fixed 2 s delay at 100% adds 2 s to every request.
func TestFaultDelay(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	f := startFaultLab(t, "testdata/faults.yaml")
	url := "http://" + f.vip(t, "backend") + "/"

	start := time.Now()
	if got, err := getPod(t.Context(), f.client, url, nil); got != "backend" {
		t.Fatalf("before the fault: answer %q (%v), want backend", got, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("before the fault a request took %v; the delay below would prove nothing", took)
	}

	f.apply(t, "RDS", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - fault:
      delay:
        fixedDelay: 2s
        percentage: {value: 100}
    route:
    - destination: {host: backend}
`)
	// The same client: its connection kept alive from the request above must see the
	// fault too. (Every outbound HCM carries the fault filter, as in Istio, so applying a
	// fault changes only routes, which open connections pick up at once.)
	c := f.client
	const n = 3
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	answers := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			answers[i], errs[i] = getPod(t.Context(), c, url, nil)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i := range n {
		t.Logf("request %d: %s in %v", i, answers[i], took[i].Round(time.Millisecond))
		if answers[i] != "backend" {
			t.Errorf("request %d: answer %q (%v), want backend", i, answers[i], errs[i])
		}
		// The delay is 2 s; the upper bound leaves room for a loaded 2-core machine.
		if took[i] < 2*time.Second || took[i] > 3500*time.Millisecond {
			t.Errorf("request %d took %v, want 2s..3.5s", i, took[i])
		}
	}
	if got := f.stat(t, "client", "http.outbound_0.0.0.0_8080.fault.delays_injected"); got != n {
		t.Errorf("fault.delays_injected = %d, want %d", got, n)
	}
}

// TestFaultAbort: an abort of 50% answers about half the requests with the given status.
func TestFaultAbort(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	f := startFaultLab(t, "testdata/faults.yaml")
	f.apply(t, "RDS", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - fault:
      abort:
        httpStatus: 503
        percentage: {value: 50}
    route:
    - destination: {host: backend}
`)
	const n = 200
	counts := sendRequests(t, f.client, "http://"+f.vip(t, "backend")+"/", n, nil)
	t.Logf("abort 50%%: answers %v", counts)
	// Binomial(200, 0.5): sd 7.1, so 65..135 is about five sd either side.
	aborted := counts["status 503"]
	if aborted < 65 || aborted > 135 || aborted+counts["backend"] != n {
		t.Errorf("answers %v; want 65..135 of %d aborted with 503 and the rest from backend", counts, n)
	}
	if got := f.stat(t, "client", "http.outbound_0.0.0.0_8080.fault.aborts_injected"); got != uint64(aborted) {
		t.Errorf("fault.aborts_injected = %d, want %d (the 503s counted)", got, aborted)
	}
}

// TestRetries: retries turn a backend failing half its requests into mostly 200, and the
// client sidecar counts them in upstream_rq_retry.
func TestRetries(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	f := startFaultLab(t, "testdata/faults.yaml")
	url := "http://" + f.vip(t, "flaky") + "/"
	const cluster = "cluster.outbound|8080||flaky.default.svc.cluster.local."

	// Without retries (meshlab adds no default retry policy) about half fail.
	before := sendRequests(t, f.client, url, 100, nil)
	t.Logf("no retries: answers %v", before)
	if before["flaky"] > 80 || before["status 503"] < 20 {
		t.Fatalf("without retries: answers %v; want about half 503", before)
	}
	if got := f.stat(t, "client", cluster+"upstream_rq_retry"); got != 0 {
		t.Errorf("upstream_rq_retry = %d before any retry policy", got)
	}

	f.apply(t, "RDS", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: flaky}
spec:
  hosts: [flaky]
  http:
  - route:
    - destination: {host: flaky}
    retries:
      attempts: 4
      perTryTimeout: 2s
      retryOn: 5xx
`)
	const n = 200
	after := sendRequests(t, f.client, url, n, nil)
	t.Logf("4 retries on 5xx: answers %v", after)
	// Each request fails only if 5 tries in a row do: 1/32, about 6 of 200 expected.
	if after["flaky"] < 180 {
		t.Errorf("with retries: answers %v; want at least 180 of %d from flaky", after, n)
	}
	retries := f.stat(t, "client", cluster+"upstream_rq_retry")
	success := f.stat(t, "client", cluster+"upstream_rq_retry_success")
	t.Logf("upstream_rq_retry %d, upstream_rq_retry_success %d, upstream_rq_retry_overflow %d, retry_limit_exceeded %d", retries, success,
		f.stat(t, "client", cluster+"upstream_rq_retry_overflow"), f.stat(t, "client", cluster+"upstream_rq_retry_limit_exceeded"))
	// About one retry per request (a geometric number of failures, mean ~1).
	if retries < n/2 {
		t.Errorf("upstream_rq_retry = %d after %d requests to a 50%%-failing backend; want at least %d", retries, n, n/2)
	}
	if success == 0 || success > retries {
		t.Errorf("upstream_rq_retry_success = %d, want between 1 and upstream_rq_retry (%d)", success, retries)
	}
}

// TestCircuitBreaker: with maxConnections 1 and http1MaxPendingRequests 1, concurrent
// clients get 503s marked as overflow (flag UO), counted in upstream_rq_pending_overflow.
func TestCircuitBreaker(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	f := startFaultLab(t, "testdata/circuit.yaml")
	f.apply(t, "CDS", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: slow}
spec:
  host: slow
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 1}
      http: {http1MaxPendingRequests: 1, maxRequestsPerConnection: 1}
`)
	url := "http://" + f.vip(t, "slow") + "/"
	// 10 clients at once, each on its own connection to the sidecar: one request is
	// served (400 ms), one waits, the others overflow at once.
	const n = 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	overloaded := 0
	for range n {
		wg.Go(func() {
			c := podClient(f.clientNS)
			defer c.CloseIdleConnections()
			code, hdr, err := getStatus(t.Context(), c, url)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				counts["error"]++
				t.Logf("request: %v", err)
				return
			}
			counts[strconv.Itoa(code)]++
			if hdr.Get("X-Envoy-Overloaded") == "true" {
				overloaded++
			}
		})
	}
	wg.Wait()
	t.Logf("%d concurrent requests: statuses %v, %d with x-envoy-overloaded", n, counts, overloaded)
	if counts["200"] < 1 || counts["503"] < 1 || counts["200"]+counts["503"] != n {
		t.Errorf("statuses %v; want some 200 and some 503, nothing else", counts)
	}
	if overloaded != counts["503"] {
		t.Errorf("%d of %d 503s carry x-envoy-overloaded: true; want all (Envoy marks overflow so)", overloaded, counts["503"])
	}
	const cluster = "cluster.outbound|8080||slow.default.svc.cluster.local."
	if got := f.stat(t, "client", cluster+"upstream_rq_pending_overflow"); got != uint64(counts["503"]) {
		t.Errorf("upstream_rq_pending_overflow = %d, want %d (the 503s)", got, counts["503"])
	}
}

// TestOutlierDetection: a pod failing every request is ejected after its first 5xx, then
// the healthy pod answers nearly everything.
func TestOutlierDetection(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	f := startFaultLab(t, "testdata/outlier.yaml")
	f.apply(t, "CDS", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend}
spec:
  host: backend
  trafficPolicy:
    outlierDetection:
      consecutive5xxErrors: 1
      interval: 1s
      baseEjectionTime: 60s
      maxEjectionPercent: 100
`)
	const n = 100
	counts := sendRequests(t, f.client, "http://"+f.vip(t, "backend")+"/", n, nil)
	t.Logf("answers %v", counts)
	// Until the bad pod is ejected, at most the requests in flight (8) reach it.
	if counts["backend-good"] < n-10 || counts["backend-good"]+counts["status 503"] != n {
		t.Errorf("answers %v; want at least %d of %d from backend-good, the rest 503", counts, n-10, n)
	}
	const od = "cluster.outbound|8080||backend.default.svc.cluster.local.outlier_detection."
	if got := f.stat(t, "client", od+"ejections_enforced_total"); got == 0 {
		t.Errorf("outlier_detection.ejections_enforced_total = 0, want > 0")
	}
	if got := f.stat(t, "client", od+"ejections_active"); got != 1 {
		t.Errorf("outlier_detection.ejections_active = %d, want 1 (backend-bad)", got)
	}
	if got := f.stat(t, "client", od+"ejections_enforced_consecutive_5xx"); got == 0 {
		t.Errorf("outlier_detection.ejections_enforced_consecutive_5xx = 0, want > 0")
	}
}

// TestOutboundTrafficPolicy: REGISTRY_ONLY blocks a destination the mesh does not know
// (HTTP gets a 502, TCP goes to BlackHoleCluster); ALLOW_ANY, applied live, lets both
// through PassthroughCluster.
func TestOutboundTrafficPolicy(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	f := startFaultLab(t, "testdata/egress.yaml")
	ip := f.podIP(t, "outside")
	httpURL := "http://" + net.JoinHostPort(ip, "8080") + "/"
	tcpAddr := net.JoinHostPort(ip, "9999")

	// A known service still works under REGISTRY_ONLY.
	if got, err := getPod(t.Context(), f.client, "http://"+f.vip(t, "backend")+"/", nil); got != "backend" {
		t.Errorf("REGISTRY_ONLY, known service: answer %q (%v), want backend", got, err)
	}
	if code, _, err := getStatus(t.Context(), f.client, httpURL); code != http.StatusBadGateway {
		t.Errorf("REGISTRY_ONLY, HTTP to unknown %s: status %d (%v), want 502", httpURL, code, err)
	}
	if answer, err := rawHTTP(t.Context(), f.clientNS, tcpAddr); err == nil {
		t.Errorf("REGISTRY_ONLY, TCP to unknown %s: got an answer %q, want the connection closed", tcpAddr, answer)
	}
	if got := f.stat(t, "client", "cluster.BlackHoleCluster.upstream_cx_none_healthy"); got != 1 {
		t.Errorf("BlackHoleCluster upstream_cx_none_healthy = %d, want 1", got)
	}

	f.apply(t, "LDS", `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  outboundTrafficPolicy: {mode: ALLOW_ANY}
`)
	if got, err := getPod(t.Context(), f.client, httpURL, nil); got != "outside" {
		t.Errorf("ALLOW_ANY, HTTP to unknown %s: answer %q (%v), want outside", httpURL, got, err)
	}
	if answer, err := rawHTTP(t.Context(), f.clientNS, tcpAddr); err != nil || !strings.HasPrefix(answer, "HTTP/1.0 200") {
		t.Errorf("ALLOW_ANY, TCP to unknown %s: answer %q (%v), want the app's HTTP/1.0 200", tcpAddr, answer, err)
	}
	if got := f.stat(t, "client", "cluster.PassthroughCluster.upstream_cx_total"); got < 2 {
		t.Errorf("PassthroughCluster upstream_cx_total = %d, want >= 2 (the HTTP and the TCP connection)", got)
	}
}

// faultLab is a running lab with a pod named "client" to send traffic from.
type faultLab struct {
	name     string
	api      *api.Client
	topo     api.Topology
	clientNS string
	client   *http.Client
}

func startFaultLab(t *testing.T, scenario string) *faultLab {
	t.Helper()
	l := startLab(t, scenario)
	f := &faultLab{name: l.name, clientNS: lab.NamespaceName(l.name, "client")}
	f.api = api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(f.api.Close)
	apiGet(t, l.name, "/v1/topology", &f.topo)
	f.client = podClient(f.clientNS)
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

// vip returns the address of service svc's port 8080.
func (f *faultLab) vip(t *testing.T, svc string) string {
	t.Helper()
	for _, s := range f.topo.Services {
		if s.Name == svc {
			return net.JoinHostPort(s.VIP.String(), "8080")
		}
	}
	t.Fatalf("no service %s in the topology: %+v", svc, f.topo.Services)
	return ""
}

func (f *faultLab) podIP(t *testing.T, pod string) string {
	t.Helper()
	for _, p := range f.topo.Pods {
		if p.Name == pod {
			return p.IP.String()
		}
	}
	t.Fatalf("no pod %s in the topology: %+v", pod, f.topo.Pods)
	return ""
}

// apply applies yaml through the lab API and waits until the client's sidecar has
// ACKed a new version of xDS type typ and is SYNCED on every type.
func (f *faultLab) apply(t *testing.T, typ, yaml string) {
	t.Helper()
	acked := func() (string, bool) {
		st, err := f.api.ProxyStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, ps := range st {
			if ps.Pod != "client" {
				continue
			}
			synced := true
			for _, ts := range ps.Types {
				synced = synced && ts.State() == "SYNCED"
			}
			return ps.Types[typ].Acked, synced
		}
		t.Fatalf("no proxy status for the client pod: %+v", st)
		return "", false
	}
	before, _ := acked()
	start := time.Now()
	changes, err := f.api.Apply(t.Context(), []api.ConfigFile{{Name: "test.yaml", Data: yaml}})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	deadline := start.Add(20 * time.Second)
	for {
		v, synced := acked()
		if synced && v != before {
			t.Logf("applied %v; client ACKed %s %s in %v", changes, typ, v, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client sidecar did not ACK a new %s version within 20s of apply (still %q)", typ, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stat reads one counter or gauge from pod's sidecar admin /stats (0 when absent).
func (f *faultLab) stat(t *testing.T, pod, name string) uint64 {
	t.Helper()
	c := podClient(lab.NamespaceName(f.name, pod))
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:15000/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET /stats of %s: %v", pod, err)
	}
	defer resp.Body.Close()
	vals, err := statstext.ParseValues(resp.Body)
	if err != nil {
		t.Fatalf("read /stats of %s: %v", pod, err)
	}
	return vals[name]
}

// getStatus sends one GET and returns the status and headers of the answer.
func getStatus(ctx context.Context, c *http.Client, url string) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header, err
}

// rawHTTP writes an HTTP/1.0 request over a plain TCP connection made in namespace ns and
// returns the first line of the answer; an error when the connection gives none.
func rawHTTP(ctx context.Context, ns, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := netns.DialContext(ctx, ns, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: outside\r\n\r\n"); err != nil {
		return "", fmt.Errorf("write request: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return line, fmt.Errorf("read answer: %w", err)
	}
	return strings.TrimSpace(line), nil
}
