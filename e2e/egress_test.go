package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// Istio's egress tasks, run as the docs run them: a curl pod (Deployment, image
// curlimages/curl), `kubectl exec` as `meshlab exec deploy/curl`, the tasks' YAML as
// written (istioctl's meshConfig.outboundTrafficPolicy.mode as meshlab's MeshConfig).
// The outside world they reach is the lab's own.

// The ServiceEntries and VirtualService of "Accessing External Services".
const (
	registryOnlyYAML = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
`
	httpbinExtYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: httpbin-ext
spec:
  hosts:
  - httpbin.org
  ports:
  - number: 80
    name: http
    protocol: HTTP
  resolution: DNS
  location: MESH_EXTERNAL
`
	googleYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: google
spec:
  hosts:
  - www.google.com
  ports:
  - number: 443
    name: https
    protocol: HTTPS
  resolution: DNS
  location: MESH_EXTERNAL
`
	httpbinTimeoutYAML = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: httpbin-ext
spec:
  hosts:
  - httpbin.org
  http:
  - timeout: 3s
    route:
    - destination:
        host: httpbin.org
      weight: 100
`
)

// The ServiceEntry and DestinationRule of "Egress TLS Origination".
const (
	cnnYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: edition-cnn-com
spec:
  hosts:
  - edition.cnn.com
  ports:
  - number: 80
    name: http-port
    protocol: HTTP
  - number: 443
    name: https-port
    protocol: HTTPS
  resolution: DNS
`
	cnnOriginationYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: edition-cnn-com
spec:
  hosts:
  - edition.cnn.com
  ports:
  - number: 80
    name: http-port
    protocol: HTTP
    targetPort: 443
  - number: 443
    name: https-port
    protocol: HTTPS
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: edition-cnn-com
spec:
  host: edition.cnn.com
  trafficPolicy:
    portLevelSettings:
    - port:
        number: 80
      tls:
        mode: SIMPLE # initiates HTTPS when accessing edition.cnn.com
`
)

// applyYAML writes doc to a file and applies it to the lab.
func applyYAML(t *testing.T, labName, doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "task.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := meshlab(t, "apply", "--wait", "--name", labName, "-f", f); err != nil {
		t.Fatalf("meshlab apply:\n%s\n%v\n%s", doc, err, out)
	}
}

// curlResult is one curl run in the curl pod: its output and exit code.
type curlResult struct {
	out  string
	code int
	took time.Duration
}

// curlIn runs curl with args in the lab's curl pod, as `kubectl exec deploy/curl -- curl`.
func curlIn(t *testing.T, labName string, args ...string) curlResult {
	t.Helper()
	start := time.Now()
	out, err := meshlab(t, append([]string{"exec", "--name", labName, "deploy/curl", "--", "curl", "--max-time", "10"}, args...)...)
	r := curlResult{out: out, took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("meshlab exec curl %v: %v\n%s", args, err, out)
	}
	return r
}

// eventually runs curl until ok accepts the result (config reaches the sidecar over
// xDS after apply returns), for at most 15 s, and fails with the last result.
func eventually(t *testing.T, labName, want string, ok func(curlResult) bool, args ...string) curlResult {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := curlIn(t, labName, args...)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl %s: exit %d, output:\n%s\nwant %s", strings.Join(args, " "), r.code, r.out, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func statusLine(want string) func(curlResult) bool {
	return func(r curlResult) bool { return r.code == 0 && strings.Contains(r.out, want) }
}

// The lab's outside world stays inside the lab: its namespace routes only back to the
// pods, no lab namespace has a default route to anything but the bridge, and no link
// of the lab sits in the host's namespace.
func checkWorldIsolated(t *testing.T, labName string) {
	t.Helper()
	ip := func(args ...string) string {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	world := ip("-n", lab.WorldNamespace(labName), "-4", "route")
	if strings.Contains(world, "default") || !strings.Contains(world, "10.244.0.0/16 via") {
		t.Errorf("routes of the outside world:\n%s\nwant only its subnet and the pod CIDR via the node, no default route", world)
	}
	if node := ip("-n", lab.NodeNamespace(labName), "-4", "route"); strings.Contains(node, "default") {
		t.Errorf("the node namespace has a default route (an uplink):\n%s", node)
	}
	if out, err := exec.Command("ip", "link", "show", "mlworld0").CombinedOutput(); err == nil {
		t.Errorf("the world link is in the host's namespace:\n%s", out)
	}
}

// TestEgressControlTask reproduces "Accessing External Services": ALLOW_ANY lets HTTPS
// out through PassthroughCluster; REGISTRY_ONLY resets it (curl exit 35) and answers 502
// to HTTP until ServiceEntries name the hosts; a VirtualService timeout on httpbin.org
// answers 504 after 3 s to /delay/5.
func TestEgressControlTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/egress-world.yaml")
	checkWorldIsolated(t, l.name)

	// ALLOW_ANY (the default): the real-looking sites answer through the sidecar.
	for _, u := range []string{"https://www.google.com", "https://edition.cnn.com"} {
		eventually(t, l.name, "HTTP/2 200", statusLine("HTTP/2 200"), "-sSI", u)
	}
	if r := curlIn(t, l.name, "-sS", "http://httpbin.org/headers"); r.code != 0 || !strings.Contains(r.out, `"Host": "httpbin.org"`) {
		t.Errorf("ALLOW_ANY http://httpbin.org/headers: exit %d\n%s\nwant httpbin's headers", r.code, r.out)
	}

	// REGISTRY_ONLY: HTTPS is reset (exit 35), HTTP gets 502.
	applyYAML(t, l.name, registryOnlyYAML)
	for _, u := range []string{"https://www.google.com", "https://edition.cnn.com"} {
		eventually(t, l.name, "curl exit code 35", func(r curlResult) bool { return r.code == 35 }, "-sSI", u)
	}
	eventually(t, l.name, "502", statusLine("502"), "-sS", "-o", "/dev/null", "-w", "%{http_code}\n", "http://httpbin.org/headers")

	// A ServiceEntry for each host lets it out again.
	applyYAML(t, l.name, httpbinExtYAML)
	r := eventually(t, l.name, "httpbin's headers", statusLine(`"Host": "httpbin.org"`), "-sS", "http://httpbin.org/headers")
	if !strings.Contains(r.out, "X-Envoy-Peer-Metadata-Id") {
		t.Errorf("httpbin.org saw no sidecar headers:\n%s", r.out)
	}
	applyYAML(t, l.name, googleYAML)
	eventually(t, l.name, "HTTP/2 200", statusLine("HTTP/2 200"), "-sSI", "https://www.google.com")
	if r := curlIn(t, l.name, "-sSI", "https://edition.cnn.com"); r.code != 35 {
		t.Errorf("edition.cnn.com has no ServiceEntry under REGISTRY_ONLY: exit %d, want 35\n%s", r.code, r.out)
	}
	// The sidecar's access log names the ServiceEntries' clusters, as the task shows.
	logs, err := meshlab(t, "logs", "--name", l.name, curlPod(t, l.name), "-c", "proxy")
	if err != nil || !strings.Contains(logs, "outbound|80||httpbin.org") || !strings.Contains(logs, "outbound|443||www.google.com") {
		t.Errorf("sidecar access log (err %v) lacks outbound|80||httpbin.org or outbound|443||www.google.com:\n%s", err, logs)
	}

	// Manage traffic to an external service: a 3 s timeout cuts /delay/5 with a 504.
	applyYAML(t, l.name, httpbinTimeoutYAML)
	r = eventually(t, l.name, "504", statusLine("504"), "-sS", "-o", "/dev/null", "-w", "%{http_code}\n", "http://httpbin.org/delay/5")
	if r.took < 2500*time.Millisecond || r.took > 5*time.Second {
		t.Errorf("/delay/5 answered 504 after %v, want about 3s (the VirtualService's timeout)", r.took)
	}
}

// curlPod returns the curl Deployment's pod name.
func curlPod(t *testing.T, labName string) string {
	t.Helper()
	rec, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, labName))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rec.Pods {
		if strings.HasPrefix(p.Name, "curl-") {
			return p.Name
		}
	}
	t.Fatalf("no curl pod in %+v", rec.Pods)
	return ""
}

// TestEgressTLSOriginationTask reproduces "Egress TLS Origination": plain HTTP to
// edition.cnn.com is redirected to HTTPS (301, then HTTP/2 200 with -L); with the port
// 80 -> 443 ServiceEntry and a SIMPLE DestinationRule the sidecar originates TLS and
// curl gets 200 at once over HTTP/1.1, the site seeing HTTPS; HTTPS from the app still
// works. The site's certificate is the lab's public CA's, not the mesh CA's: a rule
// trusting only the mesh root fails to verify it (503).
func TestEgressTLSOriginationTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/egress-world.yaml")

	applyYAML(t, l.name, cnnYAML)
	r := eventually(t, l.name, "a 301 to https, then HTTP/2 200", statusLine("HTTP/2 200"), "-sSL", "-o", "/dev/null", "-D", "-", "http://edition.cnn.com/politics")
	for _, want := range []string{"HTTP/1.1 301 Moved Permanently", "location: https://edition.cnn.com/politics"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("before TLS origination:\n%s\nwant %q", r.out, want)
		}
	}

	applyYAML(t, l.name, cnnOriginationYAML)
	r = eventually(t, l.name, "HTTP/1.1 200 OK without a redirect", func(r curlResult) bool {
		return r.code == 0 && strings.Contains(r.out, "HTTP/1.1 200 OK") && !strings.Contains(r.out, "301")
	}, "-sSL", "-o", "/dev/null", "-D", "-", "http://edition.cnn.com/politics")
	if body := curlIn(t, l.name, "-sS", "http://edition.cnn.com/politics"); !strings.Contains(body.out, "over HTTPS") {
		t.Errorf("edition.cnn.com saw the request over plain HTTP; the sidecar did not originate TLS:\n%s", body.out)
	}
	if r := curlIn(t, l.name, "-sSI", "https://edition.cnn.com/politics"); !strings.Contains(r.out, "HTTP/2 200") {
		t.Errorf("HTTPS from the app after TLS origination: exit %d\n%s", r.code, r.out)
	}

	// The public CA is the lab's own, not the mesh CA: trusting the mesh root alone
	// (caCertificates naming it) makes the sidecar refuse the site's certificate.
	paths := lab.PathsFor(lab.DefaultRunRoot, l.name)
	world, err := os.ReadFile(filepath.Join(paths.Dir, lab.WorldCAFile))
	if err != nil {
		t.Fatal(err)
	}
	meshRoot := filepath.Join(paths.Dir, "ca-cert.pem")
	mesh, err := os.ReadFile(meshRoot)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(world, mesh) || len(world) == 0 {
		t.Fatal("the outside world's CA is the mesh CA")
	}
	applyYAML(t, l.name, strings.Replace(cnnOriginationYAML, "mode: SIMPLE # initiates HTTPS when accessing edition.cnn.com",
		"mode: SIMPLE\n        caCertificates: "+meshRoot, 1))
	eventually(t, l.name, "503 (certificate verify failed)", statusLine("503"), "-sS", "-o", "/dev/null", "-w", "%{http_code}\n", "http://edition.cnn.com/politics")
	// The world's own CA file verifies it again.
	applyYAML(t, l.name, strings.Replace(cnnOriginationYAML, "mode: SIMPLE # initiates HTTPS when accessing edition.cnn.com",
		"mode: SIMPLE\n        caCertificates: "+filepath.Join(paths.Dir, lab.WorldCAFile), 1))
	eventually(t, l.name, "200", statusLine("200"), "-sS", "-o", "/dev/null", "-w", "%{http_code}\n", "http://edition.cnn.com/politics")
}

// A pod without a sidecar (the "legacy" namespace) reaches the outside world as any
// Kubernetes pod reaches the Internet: the cluster DNS answers the site's name, and its
// system trust verifies the site's certificate (curl without -k), straight from the app.
func TestEgressWithoutSidecar(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-legacy.yaml")
	r := curlIn(t, l.name, "-sS", "https://httpbin.org/headers")
	if r.code != 0 || !strings.Contains(r.out, `"Host": "httpbin.org"`) {
		t.Fatalf("curl https://httpbin.org/headers from a pod without a sidecar: exit %d\n%s", r.code, r.out)
	}
	if strings.Contains(r.out, "X-Envoy") {
		t.Errorf("a pod without a sidecar went through a proxy:\n%s", r.out)
	}
	if r := curlIn(t, l.name, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://edition.cnn.com/"); r.out != "301" {
		t.Errorf("http://edition.cnn.com/ from a pod without a sidecar: exit %d %q, want 301", r.code, r.out)
	}
}

// googleCNNSplitYAML is a VirtualService of tls routes for the mesh: the sidecars send
// half the connections for SNI www.google.com to edition.cnn.com's cluster.
const googleCNNSplitYAML = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: google-split
spec:
  hosts:
  - www.google.com
  tls:
  - match:
    - port: 443
      sniHosts:
      - www.google.com
    route:
    - destination:
        host: www.google.com
        port:
          number: 443
      weight: 50
    - destination:
        host: edition.cnn.com
        port:
          number: 443
      weight: 50
`

// TestEgressTLSBySNI is "Accessing External Services" with TLS ServiceEntries under
// REGISTRY_ONLY: two external hosts share port 443 and the sidecar tells them apart by
// the SNI of curl's handshake (one 0.0.0.0_443 listener, a chain per host), so both
// answer HTTP/2 200 once their entries exist, each through its own cluster, while
// https://httpbin.org (no entry on 443) is still reset (exit 35). A VirtualService of
// tls routes then splits SNI www.google.com between both sites' clusters: with -k,
// both sites' pages come back for https://www.google.com/.
func TestEgressTLSBySNI(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/egress-world.yaml")
	checkWorldIsolated(t, l.name)

	applyYAML(t, l.name, registryOnlyYAML)
	eventually(t, l.name, "curl exit code 35", func(r curlResult) bool { return r.code == 35 }, "-sSI", "https://edition.cnn.com")
	applyYAML(t, l.name, googleYAML)
	applyYAML(t, l.name, egressCNNTLSEntry) // istio_authz_tasks_test.go
	for _, u := range []string{"https://www.google.com", "https://edition.cnn.com"} {
		eventually(t, l.name, "HTTP/2 200", statusLine("HTTP/2 200"), "-sSI", u)
	}
	if r := curlIn(t, l.name, "-sSI", "https://httpbin.org"); r.code != 35 {
		t.Errorf("httpbin.org has no ServiceEntry on 443 under REGISTRY_ONLY: exit %d, want 35\n%s", r.code, r.out)
	}
	logs, err := meshlab(t, "logs", "--name", l.name, curlPod(t, l.name), "-c", "proxy")
	if err != nil || grepLines(logs, "outbound|443||www.google.com", " www.google.com ") == "" || grepLines(logs, "outbound|443||edition.cnn.com", " edition.cnn.com ") == "" {
		t.Errorf("curl's sidecar log (err %v) does not show each SNI sent to its own host's cluster:\n%s", err, logs)
	}

	applyYAML(t, l.name, googleCNNSplitYAML)
	page := func(r curlResult) string {
		for _, h := range []string{"www.google.com", "edition.cnn.com"} {
			if r.code == 0 && strings.Contains(r.out, "<h1>"+h+"</h1>") {
				return h
			}
		}
		return ""
	}
	get := []string{"-sk", "https://www.google.com/"}
	eventually(t, l.name, "edition.cnn.com's page for SNI www.google.com", func(r curlResult) bool { return page(r) == "edition.cnn.com" }, get...)
	seen := map[string]int{}
	for range 20 {
		r := curlIn(t, l.name, get...)
		seen[page(r)]++
	}
	t.Logf("20 connections for SNI www.google.com reached %v", seen)
	if seen["www.google.com"] == 0 || seen["edition.cnn.com"] == 0 || seen[""] != 0 {
		t.Errorf("20 connections for SNI www.google.com reached %v, want both sites and no failure", seen)
	}
}
