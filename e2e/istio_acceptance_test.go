package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestIstioAcceptance applies, to a running lab, configs Istio accepts although they look
// wrong, and checks each behaves as it does in Istio: relative weights split by their
// ratio; of two VirtualServices for one host only one routes it (istiod does not merge
// them); two DestinationRules for one host merge; a DestinationRule for a host with no
// Service changes nothing; a route to a
// subset no DestinationRule defines answers 503 (no cluster: NC), and to a subset that
// selects no pod 503 "no healthy upstream" (UH); the deprecated fault.delay.percent
// delays requests.
func TestIstioAcceptance(t *testing.T) {
	testutil.RequireRoot(t)
	// Not parallel (tparallel): its subtests share the test's lab and run one after another.
	l := startLab(t, "testdata/traffic.yaml")
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(lc.Close)
	var topo api.Topology
	apiGet(t, l.name, "/v1/topology", &topo)
	var url string
	for _, s := range topo.Services {
		if s.Name == "backend" {
			url = "http://" + net.JoinHostPort(s.VIP.String(), "8080") + "/"
		}
	}
	if url == "" {
		t.Fatalf("no backend service in the topology: %+v", topo.Services)
	}
	client := podClient(lab.NamespaceName(l.name, "frontend-v1"))
	t.Cleanup(client.CloseIdleConnections)

	t.Run("relative weights", func(t *testing.T) {
		applyAndSync(t, l.name, lc, vsYAML("backend", "  http:\n  - route:\n    - {destination: {host: backend, subset: v1}, weight: 1}\n    - {destination: {host: backend, subset: v2}, weight: 3}\n"))
		counts := sendRequests(t, client, url, 400, nil)
		// Binomial(400, 0.25): mean 100, sd 8.7; 60..140 is more than four sd either side.
		if v1 := counts["backend-v1"]; v1 < 60 || v1 > 140 || v1+counts["backend-v2"] != 400 {
			t.Errorf("weights 1 and 3: answers by pod %v; want about 100 from backend-v1 and the rest from backend-v2", counts)
		}
	})

	t.Run("two VirtualServices for one host", func(t *testing.T) {
		// backend-b, applied first, routes everything to v2; backend-a, applied later,
		// to v1. istiod keeps one VirtualService per host, the oldest then the first by
		// name: objects applied in one lab have no creation time, so backend-a wins.
		if out, err := meshlab(t, "delete", "--wait", "--name", l.name, "vs", "backend"); err != nil {
			t.Fatalf("delete vs backend: %v\n%s", err, out)
		}
		applyAndSync(t, l.name, lc, vsYAML("backend-b", "  http: [{route: [{destination: {host: backend.default.svc.cluster.local, subset: v2}}]}]\n"))
		applyAndSync(t, l.name, lc, vsYAML("backend-a", "  http: [{route: [{destination: {host: backend, subset: v1}}]}]\n"))
		if got := sendRequests(t, client, url, 50, nil); got["backend-v1"] != 50 {
			t.Errorf("answers by pod %v; want all 50 from backend-v1 (VirtualService backend-a)", got)
		}
		out, err := meshlab(t, "analyze", "--name", l.name)
		if !strings.Contains(out, "[IST0109]") || !strings.Contains(out, "default/backend-a,default/backend-b") {
			t.Errorf("analyze: %v\n%s\nwant IST0109 naming both VirtualServices", err, out)
		}
		// kubectl's TYPE/NAME form, two objects in one (atomic) delete.
		out, err = meshlab(t, "delete", "--wait", "--name", l.name, "vs/backend-a", "virtualservice/backend-b")
		if err != nil || !strings.Contains(out, `virtualservice.networking.istio.io "backend-a" deleted`) || !strings.Contains(out, `virtualservice.networking.istio.io "backend-b" deleted`) {
			t.Fatalf("delete vs/backend-a virtualservice/backend-b: %v\n%s", err, out)
		}
	})

	t.Run("DestinationRule for a host with no Service", func(t *testing.T) {
		out := applyFile(t, l.name, "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: ratings}\nspec:\n  host: ratings\n  subsets: [{name: v1, labels: {version: v1}}]\n")
		if !strings.Contains(out, "destinationrule.networking.istio.io/ratings created") {
			t.Errorf("apply: %s", out)
		}
		applyAndSync(t, l.name, lc, vsYAML("backend", "  http: [{route: [{destination: {host: backend, subset: v2}}]}]\n"))
		if got := sendRequests(t, client, url, 20, nil); got["backend-v2"] != 20 {
			t.Errorf("answers by pod %v; want all 20 from backend-v2", got)
		}
	})

	t.Run("two DestinationRules for one host", func(t *testing.T) {
		// istiod merges them: the lab's rule "backend" keeps v1 and v2, and
		// "backend-canary" adds the subset canary.
		dr := "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: backend-canary}\nspec:\n  host: backend.default.svc.cluster.local\n  subsets: [{name: canary, labels: {version: v2}}]\n"
		applyAndSync(t, l.name, lc, dr+"---\n"+vsYAML("backend", "  http: [{route: [{destination: {host: backend, subset: canary}, weight: 1}, {destination: {host: backend, subset: v1}, weight: 1}]}]\n"))
		counts := sendRequests(t, client, url, 100, nil)
		if counts["backend-v1"] < 25 || counts["backend-v2"] < 25 || counts["backend-v1"]+counts["backend-v2"] != 100 {
			t.Errorf("answers by pod %v; want both subsets (canary from backend-canary, v1 from backend) answering", counts)
		}
		if out, err := meshlab(t, "delete", "--wait", "--name", l.name, "dr", "backend-canary"); err != nil {
			t.Fatalf("delete dr backend-canary: %v\n%s", err, out)
		}
	})

	t.Run("subset no DestinationRule defines", func(t *testing.T) {
		applyAndSync(t, l.name, lc, vsYAML("backend", "  http: [{route: [{destination: {host: backend, subset: v3}}]}]\n"))
		resp := getWithID(t, client, url, "accept-nc")
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", resp.StatusCode)
		}
		if line, ok := proxyLogLine(t, l.name, "frontend-v1", "accept-nc", 10*time.Second); !ok || !strings.Contains(line, " 503 NC ") {
			t.Errorf("frontend-v1's access log line %q; want 503 NC (the route names a cluster that does not exist)", line)
		}
	})

	t.Run("subset that selects no pod", func(t *testing.T) {
		dr := "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: backend}\nspec:\n  host: backend\n  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2, labels: {version: v2}}\n  - {name: v3, labels: {version: v3}}\n"
		applyAndSync(t, l.name, lc, dr+"---\n"+vsYAML("backend", "  http: [{route: [{destination: {host: backend, subset: v3}}]}]\n"))
		resp := getWithID(t, client, url, "accept-uh")
		if resp.StatusCode != http.StatusServiceUnavailable || resp.body != "no healthy upstream" {
			t.Errorf("answer %d %q, want 503 \"no healthy upstream\"", resp.StatusCode, resp.body)
		}
		if line, ok := proxyLogLine(t, l.name, "frontend-v1", "accept-uh", 10*time.Second); !ok || !strings.Contains(line, " 503 UH ") {
			t.Errorf("frontend-v1's access log line %q; want 503 UH", line)
		}
	})

	t.Run("fault.delay.percent", func(t *testing.T) {
		applyAndSync(t, l.name, lc, vsYAML("backend", "  http:\n  - fault: {delay: {fixedDelay: 400ms, percent: 100}}\n    route: [{destination: {host: backend}}]\n"))
		start := time.Now()
		if resp := getWithID(t, client, url, "accept-delay"); resp.StatusCode != http.StatusOK {
			t.Errorf("status %d, want 200", resp.StatusCode)
		}
		if d := time.Since(start); d < 400*time.Millisecond {
			t.Errorf("answered in %v, want a 400ms delay (percent: 100)", d)
		}
		// Without percent or percentage, Istio injects the delay into no request.
		applyAndSync(t, l.name, lc, vsYAML("backend", "  http:\n  - fault: {delay: {fixedDelay: 2s}}\n    route: [{destination: {host: backend}}]\n"))
		start = time.Now()
		if resp := getWithID(t, client, url, "accept-nodelay"); resp.StatusCode != http.StatusOK || time.Since(start) > 1500*time.Millisecond {
			t.Errorf("status %d after %v, want 200 without the delay", resp.StatusCode, time.Since(start))
		}
	})
}

// vsYAML returns a VirtualService called name for host backend with spec lines after hosts.
func vsYAML(name, rest string) string {
	return "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: " + name + "}\nspec:\n  hosts: [backend]\n" + rest
}

// applyFile applies yaml with `meshlab apply -f` and returns its output.
func applyFile(t *testing.T, name, yaml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "objs.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := meshlab(t, "apply", "--wait", "--name", name, "-f", file)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	return out
}

type answer struct {
	StatusCode int
	body       string
}

// getWithID sends one GET tagged with x-request-id id.
func getWithID(t *testing.T, c *http.Client, url, id string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", id)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return answer{StatusCode: resp.StatusCode, body: b.String()}
}

// passthroughLab: frontend calls backend; the backend pods' app listens on 8080, which
// the Service declares, and on 9000, which no Service declares. The mesh is STRICT.
const passthroughLab = `apiVersion: v1
kind: Service
metadata: {name: frontend}
spec:
  selector: {app: frontend}
  ports: [{name: http, port: 8080}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: frontend-v1}
spec:
  labels: {app: frontend, version: v1}
  serviceAccount: frontend
  ports: [8080]
  app: {}
---
apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: backend-v1}
spec:
  labels: {app: backend, version: v1}
  serviceAccount: backend
  ports: [8080, 9000]
  app: {}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
`

// TestPassthroughFollowsMTLSAndAuthz checks, with real traffic, Istio's inbound
// passthrough: under STRICT a port no Service declares refuses plaintext (a client
// sidecar reaches it through PassthroughCluster, in plaintext, so the connection is
// closed) while the declared port answers over mTLS; under PERMISSIVE the undeclared
// port answers, and an AuthorizationPolicy selecting the pod applies to it (403 from
// the virtualInbound-catchall-http chain's RBAC filter).
func TestPassthroughFollowsMTLSAndAuthz(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	file := filepath.Join(t.TempDir(), "passthrough.yaml")
	if err := os.WriteFile(file, []byte(passthroughLab), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLab(t, file)
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(lc.Close)
	backend := "http://" + net.JoinHostPort(podIP(t, lc, "backend-v1"), "9000") + "/"
	var topo api.Topology
	apiGet(t, l.name, "/v1/topology", &topo)
	var declared string
	for _, s := range topo.Services {
		if s.Name == "backend" {
			declared = "http://" + net.JoinHostPort(s.VIP.String(), "8080") + "/"
		}
	}
	client := podClient(lab.NamespaceName(l.name, "frontend-v1"))
	client.Transport.(*http.Transport).DisableKeepAlives = true
	t.Cleanup(client.CloseIdleConnections)

	if got := sendRequests(t, client, declared, 5, nil); got["backend-v1"] != 5 {
		t.Errorf("STRICT, declared port over the Service: answers %v, want 5 from backend-v1", got)
	}
	if got := sendRequests(t, client, backend, 5, nil); got["error"] != 5 {
		t.Errorf("STRICT, undeclared port in plaintext: answers %v, want every connection refused", got)
	}

	waitLDS(t, lc, func() {
		applyFile(t, l.name, `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: PERMISSIVE}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: no-admin}
spec:
  selector: {matchLabels: {app: backend}}
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]
`)
	})
	if got := sendRequests(t, client, backend, 5, nil); got["backend-v1"] != 5 {
		t.Errorf("PERMISSIVE, undeclared port: answers %v, want 5 from backend-v1", got)
	}
	if got := sendRequests(t, client, backend+"admin", 5, nil); got["status 403"] != 5 {
		t.Errorf("PERMISSIVE, undeclared port, DENY /admin: answers %v, want 5 times 403", got)
	}
}

// waitLDS runs apply and waits until every proxy has ACKed an LDS version newer than
// the one it ran before.
func waitLDS(t *testing.T, lc *api.Client, apply func()) {
	t.Helper()
	before, err := lc.ProxyStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lds := map[string]string{}
	for _, ps := range before {
		lds[ps.Pod] = ps.Types["LDS"].Acked
	}
	apply()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := lc.ProxyStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		synced := len(st) == len(before)
		for _, ps := range st {
			synced = synced && ps.Types["LDS"].State() == "SYNCED" && ps.Types["LDS"].Acked != lds[ps.Pod]
		}
		if synced {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxies not SYNCED on a new LDS version 20s after apply: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
