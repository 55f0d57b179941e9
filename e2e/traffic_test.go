package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

const splitVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - route:
    - destination: {host: backend, subset: v1}
      weight: 90
    - destination: {host: backend, subset: v2}
      weight: 10
`

const headerVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - match:
    - headers: {x-canary: {exact: "yes"}}
    route:
    - destination: {host: backend, subset: v2}
  - route:
    - destination: {host: backend, subset: v1}
`

// TestTrafficSplitAndHeaderMatch applies VirtualServices to a running lab and measures
// real requests: a 90/10 split over 1000 requests, then a header match that sends only
// matching requests to v2, with every proxy SYNCED after each apply.
func TestTrafficSplitAndHeaderMatch(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/traffic.yaml")
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(lc.Close)

	var topo api.Topology
	apiGet(t, l.name, "/v1/topology", &topo)
	var vip string
	for _, s := range topo.Services {
		if s.Name == "backend" {
			vip = net.JoinHostPort(s.VIP.String(), "8080")
		}
	}
	if vip == "" {
		t.Fatalf("no backend service in the topology: %+v", topo.Services)
	}
	client := podClient(lab.NamespaceName(l.name, "frontend-v1"))
	t.Cleanup(client.CloseIdleConnections)

	applyAndSync(t, l.name, lc, splitVS)
	counts := sendRequests(t, client, "http://"+vip+"/", 1000, nil)
	t.Logf("90/10 split: answers by pod %v", counts)
	// Binomial(1000, 0.9): sd 9.5, so 850..950 is about five sd either side.
	if v1 := counts["backend-v1"]; v1 < 850 || v1 > 950 || counts["backend-v1"]+counts["backend-v2"] != 1000 {
		t.Errorf("answers by pod %v; want backend-v1 850..950 of 1000 and the rest backend-v2", counts)
	}

	applyAndSync(t, l.name, lc, headerVS)
	if got := sendRequests(t, client, "http://"+vip+"/", 100, http.Header{"X-Canary": {"yes"}}); got["backend-v2"] != 100 {
		t.Errorf("with x-canary: yes, answers by pod %v; want all 100 from backend-v2", got)
	}
	if got := sendRequests(t, client, "http://"+vip+"/", 100, http.Header{"X-Canary": {"no"}}); got["backend-v1"] != 100 {
		t.Errorf("with x-canary: no, answers by pod %v; want all 100 from backend-v1", got)
	}

	out, err := meshlab(t, "proxy-status", "--name", l.name)
	if err != nil {
		t.Fatalf("proxy-status: %v\n%s", err, out)
	}
	t.Logf("proxy-status:\n%s", out)
	for _, pod := range []string{"frontend-v1", "backend-v1", "backend-v2"} {
		line := lineWith(out, pod+".default")
		if strings.Count(line, "SYNCED") != 4 {
			t.Errorf("proxy-status line of %s = %q, want CDS, LDS, EDS and RDS SYNCED", pod, line)
		}
	}
	out, err = meshlab(t, "get", "vs", "backend", "--name", l.name, "-o", "yaml")
	if err != nil || !strings.Contains(out, "x-canary") {
		t.Errorf("get vs backend -o yaml: %v\n%s", err, out)
	}

	// An invalid apply is refused with file, object and field, and pushes nothing.
	before, err := lc.ProxyStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(splitVS, "weight: 10", "weight: -10", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = meshlab(t, "apply", "--name", l.name, "-f", bad)
	if err == nil || !strings.Contains(out, `bad.yaml: VirtualService default/backend: spec.http[0].route[1].weight: -10 must not be negative`) {
		t.Errorf("apply of a negative weight: err %v, output %q", err, out)
	}
	after, err := lc.ProxyStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range after {
		if after[i].Types["RDS"].Sent != before[i].Types["RDS"].Sent {
			t.Errorf("a refused apply pushed config to %s: RDS %s -> %s", after[i].Pod, before[i].Types["RDS"].Sent, after[i].Types["RDS"].Sent)
		}
	}
	if out, err := meshlab(t, "delete", "--name", l.name, "vs", "backend"); err != nil || strings.TrimSpace(out) != `virtualservice.networking.istio.io "backend" deleted` {
		t.Errorf("delete vs backend: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "get", "vs", "--name", l.name); err != nil || strings.Contains(out, "backend") {
		t.Errorf("get vs after delete: %v\n%s", err, out)
	}
}

// applyAndSync applies yaml with `meshlab apply -f` and waits until every proxy has
// ACKed a version newer than the one it ran before.
func applyAndSync(t *testing.T, name string, lc *api.Client, yaml string) {
	t.Helper()
	before, err := lc.ProxyStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The server versions each type by the change it last changed in; apply answers once
	// the change is stored and proxy-status waits for its push, so the change has reached
	// every proxy when all are SYNCED and some type moved (a DestinationRule that only
	// adds a subset changes CDS and EDS, not RDS).
	acked := map[string]string{}
	for _, ps := range before {
		for typ, ts := range ps.Types {
			acked[ps.Pod+" "+typ] = ts.Acked
		}
	}
	file := filepath.Join(t.TempDir(), "vs.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := meshlab(t, "apply", "--name", name, "-f", file); err != nil || !strings.Contains(out, "virtualservice.networking.istio.io/backend") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := lc.ProxyStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		synced, moved := len(st) == 3, false
		for _, ps := range st {
			for _, typ := range []string{"CDS", "LDS", "EDS", "RDS"} {
				synced = synced && ps.Types[typ].State() == "SYNCED"
				moved = moved || ps.Types[typ].Acked != acked[ps.Pod+" "+typ]
			}
		}
		if synced && moved {
			t.Logf("apply to every proxy ACKing: %v", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxies not SYNCED on a new version 20s after apply: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// podClient returns an HTTP client whose connections are made inside the pod namespace
// ns, so they are captured by the pod's sidecar like the app's own.
func podClient(ns string) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return netns.DialContext(ctx, ns, network, addr)
			},
			MaxIdleConnsPerHost: 8,
		},
	}
}

// sendRequests sends n GETs to url over 8 connections and counts the answers by the demo
// app's "pod" field ("status N" for a non-200 answer, "error" for none).
func sendRequests(t *testing.T, c *http.Client, url string, n int, h http.Header) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	var firstErr error
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				key, err := getPod(t.Context(), c, url, h)
				mu.Lock()
				counts[key]++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Logf("first error: %v", firstErr)
	}
	return counts
}

func getPod(ctx context.Context, c *http.Client, url string, h http.Header) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error", err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return "error", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "error", err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", resp.StatusCode), fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	var answer struct {
		Pod string `json:"pod"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "error", fmt.Errorf("answer is not the demo app's JSON: %w: %s", err, body)
	}
	return answer.Pod, nil
}

// apiGet reads a lab API path into out.
func apiGet(t *testing.T, name, path string, out any) {
	t.Helper()
	sock := lab.PathsFor(lab.DefaultRunRoot, name).APISocket()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://lab" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: decode: %v", path, err)
	}
}

func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
