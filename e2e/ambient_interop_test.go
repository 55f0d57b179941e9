package e2e

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// ambientInteropLab has, in one lab, an ambient namespace (default: curl and httpbin,
// and a ServiceEntry whose host only Istio's DNS proxies know), a sidecar namespace
// (side: sleep and httpbin, injected) and a namespace of neither (plain: a curl pod
// outside the mesh). Service flaky in default has a ready ambient pod and a sidecar pod
// whose proxy cannot start (never ready).
const ambientInteropLab = `apiVersion: v1
kind: Namespace
metadata: {name: default, labels: {istio.io/dataplane-mode: ambient}}
---
apiVersion: v1
kind: Namespace
metadata: {name: side, labels: {istio-injection: enabled}}
---
apiVersion: v1
kind: Namespace
metadata: {name: plain}
---
apiVersion: v1
kind: Service
metadata: {name: httpbin, namespace: default, labels: {app: httpbin}}
spec:
  ports: [{name: http, port: 8000, targetPort: 8080}]
  selector: {app: httpbin}
---
apiVersion: v1
kind: Pod
metadata: {name: httpbin, namespace: default, labels: {app: httpbin}}
spec:
  containers: [{name: httpbin, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: curl, namespace: default, labels: {app: curl}}
spec:
  containers: [{name: curl, image: curlimages/curl, command: ["/bin/sleep", "infinity"]}]
---
apiVersion: v1
kind: Service
metadata: {name: httpbin, namespace: side, labels: {app: httpbin}}
spec:
  ports: [{name: http, port: 8000, targetPort: 8080}]
  selector: {app: httpbin}
---
apiVersion: v1
kind: Pod
metadata: {name: httpbin, namespace: side, labels: {app: httpbin}}
spec:
  containers: [{name: httpbin, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: sleep, namespace: side, labels: {app: sleep}}
spec:
  containers: [{name: sleep, image: curlimages/curl, command: ["/bin/sleep", "infinity"]}]
---
apiVersion: v1
kind: Service
metadata: {name: flaky, namespace: default, labels: {app: flaky}}
spec:
  ports: [{name: http, port: 8000, targetPort: 8080}]
  selector: {app: flaky}
---
apiVersion: v1
kind: Pod
metadata: {name: flaky-good, namespace: default, labels: {app: flaky}}
spec:
  containers: [{name: httpbin, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 8080}]}]
---
` + flakyBroken + `---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext-api, namespace: default}
spec:
  hosts: [api.ext.example]
  addresses: [192.0.2.80]
  ports: [{number: 80, name: http, protocol: HTTP}]
  location: MESH_EXTERNAL
  resolution: NONE
---
apiVersion: v1
kind: Pod
metadata: {name: outsider, namespace: plain, labels: {app: outsider}}
spec:
  containers: [{name: outsider, image: curlimages/curl, command: ["/bin/sleep", "infinity"]}]
`

// flakyBroken is a pod of Service flaky whose sidecar cannot start: never ready.
const flakyBroken = `apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: flaky-broken, namespace: default}
spec:
  labels: {app: flaky}
  ports: [8080]
  app: {}
  sidecar: {proxyPath: /nonexistent/envoy}
`

// TestAmbientSidecarInterop sends traffic both ways between an ambient pod and a sidecar
// pod of one lab, and shows STRICT peer authentication on the ambient namespace refusing
// plaintext from a pod outside the mesh while HBONE from an ambient pod still passes.
// Ambient -> sidecar is what Istio's ztunnel does for a destination WDS gives no HBONE (a
// sidecar pod without the networking.istio.io/tunnel label, as Istio's injector leaves
// it by default): plaintext to the pod's port, which its sidecar takes in PERMISSIVE.
func TestAmbientSidecarInterop(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	l := startLab(t, writeTemp(t, "interop.yaml", ambientInteropLab))
	// curlFrom runs curl in pod (-n ns) and returns its output and exit code.
	curlFrom := func(pod, ns string, args ...string) (string, int) {
		t.Helper()
		out, err := meshlab(t, append([]string{"exec", "--name", l.name, "-n", ns, pod, "--", "curl", "-sS", "--max-time", "10"}, args...)...)
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return out, ee.ExitCode()
		case err != nil:
			t.Fatalf("meshlab exec %s: %v\n%s", pod, err, out)
		}
		return out, 0
	}
	// until polls curl from pod until its exit code is code, for at most 20 s.
	until := func(what string, code int, pod, ns string, args ...string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, got := curlFrom(pod, ns, args...)
			if got == code {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: curl exit %d, want %d\n%s", what, got, code, out)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	status := []string{"-o", "/dev/null", "-w", "%{http_code}"}

	// DNS: istio-cni's rule sends the ambient pod's queries to ztunnel's DNS proxy (its
	// jump is ahead of the lab's kube-dns rule), which answers the ServiceEntry's host from
	// WDS; kube-dns, which a pod outside the mesh asks, does not know it.
	getent := func(pod, ns string) (string, error) {
		return meshlab(t, "exec", "--name", l.name, "-n", ns, pod, "--", "getent", "hosts", "api.ext.example")
	}
	if out, err := getent("curl", "default"); err != nil || !strings.HasPrefix(out, "192.0.2.80 ") {
		t.Errorf("the ambient pod resolved api.ext.example to %q (%v), want 192.0.2.80 from ztunnel's DNS proxy", out, err)
	}
	if out, err := getent("outsider", "plain"); err == nil {
		t.Errorf("a pod outside the mesh resolved api.ext.example (%q): kube-dns should not know a ServiceEntry host", out)
	}
	fams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	if n := counterValue(fams["istio_dns_requests_total"], map[string]string{"namespace": "istio-system", "request_query_type": "a", "source_canonical_service": "curl"}); n == 0 {
		t.Errorf("ztunnel counted no DNS query from the ambient pod curl (istio_dns_requests_total)")
	}

	if out := until("ambient -> sidecar", 0, "curl", "default", append(status, "http://httpbin.side:8000/get")...); out != "200" {
		t.Errorf("ambient -> sidecar answered %q, want 200", out)
	}
	if out := until("sidecar -> ambient", 0, "sleep", "side", append(status, "http://httpbin.default:8000/get")...); out != "200" {
		t.Errorf("sidecar -> ambient answered %q, want 200", out)
	}
	// ztunnel's outbound line for curl -> the sidecar pod: plaintext, no tunnel.
	deadline := time.Now().Add(20 * time.Second)
	line := regexp.MustCompile(`(?m)^.*connection complete\t.*src\.workload="curl".*dst\.workload="httpbin" dst\.namespace="side".*direction="outbound".*$`)
	for {
		out, _ := meshlab(t, "logs", "--name", l.name, "ds/ztunnel", "-n", "istio-system")
		if m := line.FindString(out); m != "" {
			if strings.Contains(m, "dst.hbone_addr=") || strings.Contains(m, "error=") {
				t.Errorf("ztunnel's line for ambient -> sidecar: %s\nwant plaintext to the sidecar pod (no dst.hbone_addr), no error", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ztunnel logged no outbound connection from curl to side/httpbin:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Readiness: flaky-broken never became ready, so WDS gives it UNHEALTHY and ztunnel
	// sends every connection to flaky-good (one not ready would be reset: nothing takes
	// its sidecar's capture). Each request on a new connection, so each picks again.
	flaky := []string{"-H", "Connection: close"}
	for range 12 {
		flaky = append(flaky, "-o", "/dev/null", "-w", "%{http_code}\n", "http://flaky:8000/get")
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, code := curlFrom("curl", "default", flaky...)
		if code == 0 && strings.Count(out, "200\n") == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ambient -> flaky (a ready pod and one not ready): exit %d\n%s\nwant 12 answers of 200: ztunnel picked the pod that is not ready", code, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// It goes, so that apply --wait below waits for proxies that can connect.
	mustMeshlab(t, "delete", "--name", l.name, "-f", writeTemp(t, "flaky-broken.yaml", flakyBroken))

	// Outside the mesh, plaintext reaches the ambient pod (ztunnel's inbound plaintext
	// port, PERMISSIVE) until STRICT, which ztunnel enforces by resetting it.
	until("outsider -> ambient in PERMISSIVE", 0, "outsider", "plain", append(status, "http://httpbin.default:8000/get")...)
	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: default
  namespace: default
spec:
  mtls:
    mode: STRICT
`)
	until("outsider -> ambient under STRICT", 56, "outsider", "plain", append(status, "http://httpbin.default:8000/get")...)
	if out, code := curlFrom("curl", "default", append(status, "http://httpbin.default:8000/get")...); code != 0 || out != "200" {
		t.Errorf("ambient -> ambient under STRICT: exit %d, %q; want 200 over HBONE", code, out)
	}

	// Sidecar -> ambient under STRICT: the sidecar tunnels to the ambient pod's 15008
	// (HBONE, as istiod's endpoint for a pod that speaks it), which ztunnel takes, where
	// Istio mTLS or plaintext to 8080 would be reset. Seen from the ambient pod's kernel:
	// the sleep pod's packets arrive on 15008, none on 8080.
	_, _, sleepIP := podIn(t, l.name, "side", "sleep")
	_, binNS, _ := podIn(t, l.name, "default", "httpbin")
	countArrivals(t, binNS, sleepIP, "15008", "8080")
	if out := until("sidecar -> ambient under STRICT", 0, "sleep", "side", append(status, "http://httpbin.default:8000/get")...); out != "200" {
		t.Errorf("sidecar -> ambient under STRICT answered %q, want 200", out)
	}
	if n := packets(t, binNS, "e2e-15008"); n == 0 {
		t.Errorf("no packet from the sidecar pod (%s) reached the ambient pod on 15008: not HBONE", sleepIP)
	}
	if n := packets(t, binNS, "e2e-8080"); n != 0 {
		t.Errorf("%d packets from the sidecar pod reached the ambient pod on 8080, around ztunnel", n)
	}
}
