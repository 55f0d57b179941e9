package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// istiodBin returns bin/meshlab-istiod (`make istiod`; `make test` builds it before the
// end-to-end tests), skipping the test when it is not built, unless in CI.
func istiodBin(tb testing.TB) string {
	tb.Helper()
	p, err := filepath.Abs("../bin/meshlab-istiod")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s is not built (make istiod): %v", p, err)
		}
		tb.Skipf("%s is not built: run `make istiod` (%v)", p, err)
	}
	return p
}

// TestIstiodControlPlane runs the hello lab with Istio's own istiod generating every
// proxy's config: requests flow through both sidecars, a VirtualService applied changes
// routing (istiod sees it as a watch event), and proxy-status shows every proxy SYNCED on
// what istiod sent, relayed by the lab.
func TestIstiodControlPlane(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	l := startLabWithin(t, 3*time.Minute, "--control-plane=istiod", "--istiod-path", bin)
	if !strings.Contains(l.out.String(), "control plane: istiod ") {
		t.Errorf("up did not say istiod is the control plane:\n%s", l.out.String())
	}
	ml := func(args ...string) (string, error) {
		return meshlab(t, append([]string{"--name", l.name}, args...)...)
	}
	backendOf := func() (string, error) {
		out, err := ml("exec", "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/")
		if err != nil {
			return "", err
		}
		var resp struct {
			Pod string `json:"pod"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			return "", err
		}
		return resp.Pod, nil
	}
	// istiod's first pushes may still be settling when the pods are ready.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := backendOf()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request through istiod's config succeeded within 20s of up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		pod, err := backendOf()
		if err != nil {
			t.Fatalf("request %d through istiod's config: %v", i, err)
		}
		seen[pod]++
	}
	if seen["backend-v1"] == 0 || seen["backend-v2"] == 0 {
		t.Errorf("answers by pod %v; want both backends (istiod's round robin)", seen)
	}

	vs := filepath.Join(t.TempDir(), "v2.yaml")
	if err := os.WriteFile(vs, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend}
spec:
  host: backend
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - route:
    - destination: {host: backend, subset: v2}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := ml("apply", "-f", vs); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	deadline = time.Now().Add(20 * time.Second)
	streak := 0
	for streak < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("requests did not all go to backend-v2 within 20s of the VirtualService")
		}
		pod, err := backendOf()
		if err == nil && pod == "backend-v2" {
			streak++
		} else {
			streak = 0
		}
	}

	var ps string
	deadline = time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ps, _ = ml("proxy-status")
		if strings.Count(ps, "SYNCED") > 0 && !strings.Contains(ps, "STALE") && !strings.Contains(ps, "NACK") &&
			strings.Contains(ps, "frontend-v1") && strings.Contains(ps, "backend-v2") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, pod := range []string{"frontend-v1", "backend-v1", "backend-v2"} {
		line := ""
		for _, l := range strings.Split(ps, "\n") {
			if strings.HasPrefix(l, pod+".") {
				line = l
			}
		}
		if !strings.Contains(line, "SYNCED") || strings.Contains(line, "STALE") || strings.Contains(line, "NACK") {
			t.Errorf("proxy-status of %s: %q; want SYNCED on what istiod sent\n%s", pod, line, ps)
		}
	}
}

// TestIstiodSeenThroughTheLab brings up hello on istiod chosen by the scenario's
// LabSettings document (no --control-plane flag), then reads istiod through the lab:
// status and version name it, proxy-status --istiod and x internal-debug read its own
// syncz and config_dump, diff --against=meshlab compares its config of a pod with
// meshlab's generator's, and a MeshConfig applied reaches istiod live. istiod killed,
// status says it EXITED and the proxies keep serving their last config.
func TestIstiodSeenThroughTheLab(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	hello, err := os.ReadFile("../scenarios/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "hello-istiod.yaml")
	settings := "\n---\napiVersion: meshlab.dev/v1alpha1\nkind: LabSettings\nmetadata: {name: lab}\nspec: {controlPlane: istiod}\n"
	if err := os.WriteFile(scenario, append(hello, settings...), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLabWithin(t, 3*time.Minute, scenario, "--istiod-path", bin)
	if !strings.Contains(l.out.String(), "control plane: istiod ") {
		t.Fatalf("up of a scenario with LabSettings controlPlane: istiod did not run istiod:\n%s", l.out.String())
	}
	ml := func(args ...string) (string, error) {
		return meshlab(t, append([]string{"--name", l.name}, args...)...)
	}
	// poll runs the command until ok accepts its output (a loaded machine: up to 30 s).
	poll := func(what string, ok func(string, error) bool, args ...string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := ml(args...)
			if ok(out, err) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: meshlab %s: %v\n%s", what, strings.Join(args, " "), err, out)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	curl := []string{"exec", "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/"}
	poll("a request through istiod's config", func(out string, err error) bool { return err == nil && strings.Contains(out, "backend-v") }, curl...)

	out, err := ml("status")
	if err != nil || !strings.Contains(out, "control plane: istiod v") || !strings.Contains(out, ", running") {
		t.Errorf("status: %v\n%s\nwant 'control plane: istiod <version>, running'", err, out)
	}
	out, err = ml("version")
	if err != nil || !strings.Contains(out, "istiod version: v") {
		t.Errorf("version: %v\n%s\nwant istiod's version", err, out)
	}
	poll("proxy-status --istiod", func(out string, err error) bool {
		return err == nil && strings.Contains(out, "frontend-v1.default") && strings.Contains(out, "SYNCED") && !strings.Contains(out, "STALE")
	}, "proxy-status", "--istiod")
	out, err = ml("x", "internal-debug", "syncz")
	var syncz []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &syncz) != nil || len(syncz) != 3 {
		t.Errorf("x internal-debug syncz: %v\n%s\nwant istiod's three proxies as JSON", err, out)
	}
	out, err = ml("x", "internal-debug", "config_dump?proxyID=frontend-v1.default")
	if err != nil || !strings.Contains(out, "outbound|8080||backend.default.svc.cluster.local") {
		t.Errorf("x internal-debug config_dump: %v\n%.2000s\nwant frontend-v1's clusters from istiod", err, out)
	}
	out, err = ml("diff", "frontend-v1", "--against=meshlab")
	if err != nil || !strings.HasPrefix(out, "pod frontend-v1: ") || !strings.Contains(out, " -> meshlab") {
		t.Errorf("diff --against=meshlab: %v\n%s", err, out)
	}
	t.Logf("diff frontend-v1 --against=meshlab:\n%.1500s", out)

	// A MeshConfig applied reaches istiod live (its mesh watcher, a full push): access
	// logs off, istiod's listeners lose their file access loggers.
	const fileLog = "envoy.access_loggers.file"
	if out, err := ml("x", "internal-debug", "config_dump?proxyID=frontend-v1.default"); err != nil || !strings.Contains(out, fileLog) {
		t.Fatalf("istiod's config_dump of frontend-v1 before the MeshConfig: %v; want %s in it", err, fileLog)
	}
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(meshFile, []byte("apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec: {accessLogFile: \"\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := ml("apply", "-f", meshFile); err != nil {
		t.Fatalf("apply MeshConfig: %v\n%s", err, out)
	}
	poll("istiod's config after the MeshConfig turned access logs off", func(out string, err error) bool {
		return err == nil && strings.Contains(out, "outbound|8080||backend.default.svc.cluster.local") && !strings.Contains(out, fileLog)
	}, "x", "internal-debug", "config_dump?proxyID=frontend-v1.default")

	r, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, l.name))
	if err != nil || r.IstiodPID == 0 {
		t.Fatalf("lab record: %+v, %v; want istiod's pid", r, err)
	}
	if err := syscall.Kill(r.IstiodPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill istiod (pid %d): %v", r.IstiodPID, err)
	}
	poll("status after istiod was killed", func(out string, err error) bool {
		return err == nil && strings.Contains(out, "control plane: istiod v") && strings.Contains(out, "EXITED: istiod exited: signal: killed")
	}, "status")
	poll("a request on the proxies' last config", func(out string, err error) bool { return err == nil && strings.Contains(out, "backend-v") }, curl...)
	if out, err := ml("x", "internal-debug", "syncz"); err == nil || !strings.Contains(out, "istiod exited") {
		t.Errorf("x internal-debug after istiod exited: %v\n%s\nwant it to say istiod exited", err, out)
	}
}

// istiodLegacyCurl is a curl pod in a namespace without injection (Istio's "legacy"
// namespace of the mTLS tasks): a plaintext client from outside the mesh.
const istiodLegacyCurl = `
---
apiVersion: v1
kind: Namespace
metadata:
  name: legacy
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: curl
  namespace: legacy
spec:
  replicas: 1
  selector:
    matchLabels: {app: curl}
  template:
    metadata:
      labels: {app: curl}
    spec:
      containers:
      - name: curl
        image: curlimages/curl
        command: ["/bin/sleep", "infinity"]
`

// TestIstiodBookinfoRoutingAndStrict runs Bookinfo on istiod: the request-routing task's
// DestinationRule and VirtualService (jason to reviews v2, everyone else to v1), then
// fault injection, traffic shifting and request timeouts, take effect as istiod pushes
// them, and a mesh-wide PeerAuthentication STRICT keeps the mesh's
// own calls working (istiod's auto mTLS) while the plaintext client from the legacy
// namespace, answered before, is refused.
func TestIstiodBookinfoRoutingAndStrict(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	bookinfo, err := os.ReadFile("testdata/kube-bookinfo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "bookinfo-legacy.yaml")
	if err := os.WriteFile(scenario, append(bookinfo, istiodLegacyCurl...), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLabWithin(t, 3*time.Minute, scenario, "--control-plane=istiod", "--istiod-path", bin)
	// get fetches the product page from the mesh's curl pod (as user, "" for none), or
	// from the legacy one; it returns the page, or "" with curl's output on failure.
	get := func(legacy bool, user string) (string, error) {
		args := []string{"exec", "--name", l.name, "-n", "default", "deploy/curl", "--", "curl", "-sS", "--fail", "--max-time", "10"}
		if legacy {
			args = []string{"exec", "--name", l.name, "-n", "legacy", "deploy/curl", "--", "curl", "-sS", "--fail", "--max-time", "10"}
		}
		if user != "" {
			args = append(args, "-H", "end-user: "+user)
		}
		out, err := meshlab(t, append(args, "http://productpage.default:9080/productpage")...)
		if err == nil && !strings.Contains(out, "<title>Simple Bookstore App</title>") {
			err = errors.New("not the product page")
		}
		return out, err
	}
	stars := func(p string) string {
		switch {
		case strings.Contains(p, `color="black"`):
			return "black"
		case strings.Contains(p, `color="red"`):
			return "red"
		}
		return "none"
	}
	// until polls check until it holds 4 times in a row, within 60 s (a loaded machine).
	until := func(what string, check func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		last := ""
		for inARow := 0; inARow < 4; {
			ok, got := check()
			if ok {
				inARow++
			} else {
				inARow, last = 0, got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not 4 times in a row within 60s; last: %.1500s", what, last)
			}
			if !ok {
				time.Sleep(300 * time.Millisecond)
			}
		}
	}
	until("the product page through istiod's config, from the mesh and from legacy (PERMISSIVE)", func() (bool, string) {
		out, err := get(false, "")
		if err != nil {
			return false, fmt.Sprintf("mesh: %v %s", err, out)
		}
		out, err = get(true, "")
		return err == nil, fmt.Sprintf("legacy: %v %s", err, out)
	})

	routing := filepath.Join(t.TempDir(), "routing.yaml")
	if err := os.WriteFile(routing, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
  - {name: v3, labels: {version: v3}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - match:
    - headers:
        end-user: {exact: jason}
    route:
    - destination: {host: reviews, subset: v2}
  - route:
    - destination: {host: reviews, subset: v1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := meshlab(t, "apply", "--name", l.name, "-f", routing); err != nil {
		t.Fatalf("apply routing: %v\n%s", err, out)
	}
	until("jason on reviews v2 (black stars), everyone else on v1 (none)", func() (bool, string) {
		anon, err := get(false, "")
		if err != nil || stars(anon) != "none" {
			return false, fmt.Sprintf("anonymous: %v, stars %s", err, stars(anon))
		}
		jason, err := get(false, "jason")
		return err == nil && stars(jason) == "black", fmt.Sprintf("jason: %v, stars %s", err, stars(jason))
	})

	// The other routing tasks on istiod, each as its page applies it: fault injection
	// (an abort of ratings for jason), traffic shifting (reviews 50/50 v1/v3) and request
	// timeouts (reviews on v2 within 0.5 s while ratings is delayed 2 s).
	apply := func(what, yaml string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "task.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := meshlab(t, "apply", "--name", l.name, "-f", f); err != nil {
			t.Fatalf("apply %s: %v\n%s", what, err, out)
		}
	}
	ratingsVS := func(fault string) string {
		return `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings}
spec:
  host: ratings
  subsets:
  - {name: v1, labels: {version: v1}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings}
spec:
  hosts: [ratings]
  http:
` + fault + `  - route:
    - destination: {host: ratings, subset: v1}
`
	}
	apply("fault injection", ratingsVS(`  - match:
    - headers:
        end-user: {exact: jason}
    fault:
      abort: {percentage: {value: 100.0}, httpStatus: 500}
    route:
    - destination: {host: ratings, subset: v1}
`))
	until("fault injection: jason's page says ratings is unavailable, everyone else's has no stars", func() (bool, string) {
		jason, err := get(false, "jason")
		if err != nil || !strings.Contains(jason, "Ratings service is currently unavailable") {
			return false, fmt.Sprintf("jason: %v, stars %s", err, stars(jason))
		}
		anon, err := get(false, "")
		return err == nil && stars(anon) == "none", fmt.Sprintf("anonymous: %v, stars %s", err, stars(anon))
	})
	apply("traffic shifting", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 50
    - destination: {host: reviews, subset: v3}
      weight: 50
`)
	seen := map[string]int{}
	until("traffic shifting: reviews v1 (no stars) and v3 (red stars) both answer", func() (bool, string) {
		page, err := get(false, "")
		if err != nil {
			return false, err.Error()
		}
		seen[stars(page)]++
		return seen["none"] > 0 && seen["red"] > 0 && seen["black"] == 0, fmt.Sprintf("seen %v", seen)
	})
	apply("request timeouts", ratingsVS(`  - fault:
      delay: {percentage: {value: 100.0}, fixedDelay: 2s}
    route:
    - destination: {host: ratings, subset: v1}
`)+`---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}
    timeout: 0.5s
`)
	until("request timeouts: reviews unavailable within its 0.5 s", func() (bool, string) {
		page, err := get(false, "")
		return err == nil && strings.Contains(page, "Sorry, product reviews are currently unavailable for this book."),
			fmt.Sprintf("%v, stars %s", err, stars(page))
	})
	if out, err := meshlab(t, "delete", "--name", l.name, "virtualservice", "ratings"); err != nil {
		t.Fatalf("delete virtualservice ratings: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "apply", "--name", l.name, "-f", routing); err != nil {
		t.Fatalf("apply routing again: %v\n%s", err, out)
	}

	strict := filepath.Join(t.TempDir(), "strict.yaml")
	if err := os.WriteFile(strict, []byte(`apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := meshlab(t, "apply", "--name", l.name, "-f", strict); err != nil {
		t.Fatalf("apply STRICT: %v\n%s", err, out)
	}
	until("STRICT: the mesh's calls answered, legacy's plaintext refused", func() (bool, string) {
		out, err := get(false, "jason")
		if err != nil || stars(out) != "black" {
			return false, fmt.Sprintf("mesh: %v, stars %s %.500s", err, stars(out), out)
		}
		out, err = get(true, "")
		return err != nil, fmt.Sprintf("legacy still answered: %v %.300s", err, out)
	})
}

// TestIstiodCircuitBreakerDump brings up, on both control planes, what `kubectl get -A
// -o yaml` printed of a shop (controlplane/config's testdata: a kind: List with status,
// managedFields, uids and the cluster's own machinery) whose DestinationRule allows httpbin one
// connection and one pending request: fortio's concurrent load gets some 503s, which
// fortio's sidecar logs with Envoy's flag UO (upstream overflow), as on the cluster.
func TestIstiodCircuitBreakerDump(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	for _, cp := range []string{"meshlab", "istiod"} {
		t.Run(cp, func(t *testing.T) {
			t.Parallel()
			args := []string{"../controlplane/config/testdata/kubectl-get-all.yaml", "--control-plane=" + cp}
			if cp == "istiod" {
				args = append(args, "--istiod-path", istiodBin(t))
			}
			l := startLabWithin(t, 3*time.Minute, args...)
			circuitBreakerTrips(t, l.name, "fortio-deploy", "http://httpbin.shop:8000/get")
		})
	}
}

// TestIstiodBugReport brings up, on both control planes, what `istioctl bug-report`
// wrote of a shop (scenarios/bugreport's fixture, archived as istioctl archives it: a
// .tar.gz whose entries are under bug-report/): its Services keep their cluster IPs,
// its mesh config turns access logs on, its DestinationRule's one-connection pool trips
// with Envoy's 503 UO under fortio's concurrent load, as on the cluster, and diff
// --against=cluster compares the report's dump of fortio's proxy with the lab's.
func TestIstiodBugReport(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	archive := filepath.Join(t.TempDir(), "bug-report.tar.gz")
	if out, err := exec.Command("tar", "-czf", archive, "-C", "../scenarios/bugreport/testdata", "bug-report").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	for _, cp := range []string{"meshlab", "istiod"} {
		t.Run(cp, func(t *testing.T) {
			t.Parallel()
			args := []string{"--from-bug-report", archive, "--control-plane=" + cp}
			if cp == "istiod" {
				args = append(args, "--istiod-path", istiodBin(t))
			}
			l := startLabWithin(t, 3*time.Minute, args...)
			for _, want := range []string{"bug-report: the cluster ran Istio 1.28.0 (versions)", "bug-report: cluster/k8s-resources: ConfigMap istio-system/istio: the mesh config"} {
				if !strings.Contains(l.out.String(), want) {
					t.Errorf("up did not say %q:\n%s", want, l.out.String())
				}
			}
			out, err := meshlab(t, "get", "svc", "-n", "shop", "--name", l.name, "httpbin", "-o", "jsonpath={.spec.clusterIP}")
			if err != nil || strings.TrimSpace(out) != "10.96.45.7" {
				t.Errorf("httpbin's cluster IP: %q (%v); want the cluster's 10.96.45.7", out, err)
			}
			clusterDumpDiff(t, l.name, cp == "istiod")
			circuitBreakerTrips(t, l.name, "deploy/fortio-deploy", "http://httpbin.shop:8000/get")
		})
	}
}

// clusterDumpDiff checks, in the lab made from the bug report fixture, that diff
// --against=cluster compares fortio's dump in the report (kept beside the lab) with the
// lab's fortio proxy: the endpoints differ by the pods' addresses (the cluster's httpbin
// was 10.244.0.12). The fixture's dumps are what istiod sent, so on istiod (sameConfig)
// nothing else differs: no listener, route or cluster.
func clusterDumpDiff(t *testing.T, labName string, sameConfig bool) {
	t.Helper()
	var out string
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err = meshlab(t, "diff", "--name", labName, "deploy/fortio-deploy.shop", "--against=cluster")
		done := err == nil && strings.Contains(out, `address: "10.244.0.12" -> "`)
		if done && sameConfig {
			done = !strings.Contains(out, "\nLDS\n") && !strings.Contains(out, "\nRDS\n") && !strings.Contains(out, "\nCDS\n")
		}
		if done {
			break
		}
		if time.Now().After(deadline) { // the lab's proxy may still be taking its config
			t.Errorf("diff deploy/fortio-deploy.shop --against=cluster: %v\n%.3000s\nwant the endpoints' addresses changed (sameConfig %v)", err, out, sameConfig)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.HasPrefix(out, "pod fortio-deploy-") || !strings.Contains(out, ".shop: cluster shop/fortio-deploy-5c4f8b6d9-k8m2p -> lab\n") {
		t.Errorf("diff's header names not fortio's lab pod and the report's:\n%.500s", out)
	}
	t.Logf("diff deploy/fortio-deploy.shop --against=cluster:\n%.1500s", out)
}

// circuitBreakerTrips checks, in lab labName, that fortio (exec target ref) reaches url
// and that its concurrent load overflows httpbin's pool of one connection and one
// pending request: some 200s, some 503s, and fortio's sidecar logging 503 UO.
func circuitBreakerTrips(t *testing.T, labName, ref, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, code := execIn(t, labName, nil, ref, "fortio", "curl", "-quiet", url)
		if code == 0 && strings.Contains(out, "HTTP/1.1 200 OK") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fortio curl %s: exit %d\n%s", url, code, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Three connections at once, as the circuit-breaking task's second run: the pool of
	// one connection and one pending request overflows. A loaded machine may serve a run
	// without overlap; a few runs make the overflow certain.
	var codes map[int]int
	for run := 0; run < 5; run++ {
		out, code := execIn(t, labName, nil, ref, "fortio", "load", "-c", "3", "-qps", "0", "-n", "30", "-loglevel", "Warning", url)
		codes = fortioCodes(t, out)
		if code != 0 || codes[200]+codes[503] != 30 {
			t.Fatalf("fortio load -c 3 -n 30: exit %d, codes %v\n%s\nwant every call answered 200 or 503", code, codes, out)
		}
		if codes[503] > 0 && codes[200] > 0 {
			break
		}
	}
	t.Logf("fortio load -c 3 -qps 0 -n 30: %v", codes)
	if codes[503] == 0 || codes[200] == 0 {
		t.Fatalf("codes %v; want some 200s and some 503s (the circuit breaker tripping)", codes)
	}
	out, err := meshlab(t, "logs", "--name", labName, ref, "-c", "istio-proxy")
	if err != nil {
		t.Fatalf("logs %s -c istio-proxy: %v\n%s", ref, err, out)
	}
	uo := 0
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, `"GET /get HTTP/1.1" 503 UO `) && strings.Contains(line, "outbound|8000||httpbin.shop.svc.cluster.local") {
			uo++
		}
	}
	if uo == 0 {
		t.Errorf("fortio's sidecar logged no '503 UO' to outbound|8000||httpbin.shop.svc.cluster.local; its log:\n%s", grepLines(out, "httpbin"))
	}
}
