package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestSidecarTLSTerminationTask walks istio.io's "Sidecar TLS termination" task
// (traffic-management/ingress/ingress-sidecar-tls-termination) as it is written: install
// with ENABLE_TLS_ON_SIDECAR_INGRESS, namespace test with injection, STRICT mTLS with
// port 9080 DISABLE, the page's openssl certificates (run as written), its Secrets, the
// httpbin Deployment mounting them into the sidecar (sidecar.istio.io/userVolume), the
// Sidecar terminating MUTUAL TLS on 9080, sleep in test (in the mesh) and in default
// (outside it: the cluster's default namespace is not labelled), then the page's three
// checks: 200 over plaintext in the mesh on 8080, 200 over mutual TLS from outside the
// mesh on 8443 with the keys copied in by kubectl cp, and a reset on 8080 from outside.
// Outputs are compared with the page's where it prints them; cleanup as the page's.
func TestSidecarTLSTerminationTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is not installed; the task makes its certificates with it")
		}
		t.Skip("openssl is not installed; the task makes its certificates with it")
	}
	samples := testutil.IstioSamples(t)
	d := &docsLab{taskLab: startTaskLabFrom(t, ambientClusterYAML), t: t}

	// Before you begin (test.sh answers istioctl's question with y).
	cmd := exec.Command(meshlabBin(t), "--lab", d.name, "install", "--set", "values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true",
		"--set", "profile=default", "--set", "values.pilot.env.ENABLE_TLS_ON_SIDECAR_INGRESS=true")
	cmd.Stdin = strings.NewReader("y\n")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "✔ Installation complete") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	d.says("namespace/test created\n", "", "create", "ns", "test")
	d.says("namespace/test labeled\n", "", "label", "namespace", "test", "istio-injection=enabled")

	// Enable global mTLS, then disable it for the externally exposed httpbin port.
	d.says("peerauthentication.security.istio.io/default created\n", sidecarTLSStrict, "-n", "test", "apply", "-f", "-")
	d.says("peerauthentication.security.istio.io/disable-peer-auth-for-external-mtls-port created\n", sidecarTLSDisable9080, "-n", "test", "apply", "-f", "-")

	// The page's certificates, made by its openssl lines as written, in a directory of
	// the reader's.
	dir := t.TempDir()
	openssl := exec.Command("sh", "-e", "-c", sidecarTLSOpenSSL)
	openssl.Dir = dir
	if out, err := openssl.CombinedOutput(); err != nil {
		t.Fatalf("the page's openssl lines: %v\n%s", err, out)
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		c := exec.Command(meshlabBin(t), append([]string{"--lab", d.name}, args...)...)
		c.Dir = dir // the page's ./example.com.crt and the files kubectl cp names
		if stdin != "" {
			c.Stdin = strings.NewReader(stdin)
		}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run("", "-n", "test", "create", "secret", "generic", "httpbin-mtls-termination-cacert", "--from-file=ca.crt=./example.com.crt"); out != "secret/httpbin-mtls-termination-cacert created\n" {
		t.Errorf("create secret generic: %q", out)
	}
	if out := run("", "-n", "test", "create", "secret", "tls", "httpbin-mtls-termination", "--cert", "./httpbin.test.svc.cluster.local.crt", "--key", "./httpbin.test.svc.cluster.local.key"); out != "secret/httpbin-mtls-termination created\n" {
		t.Errorf("create secret tls: %q", out)
	}

	// Deploy httpbin with the Secrets mounted into its sidecar, and its Sidecar.
	d.says("serviceaccount/httpbin created\nservice/httpbin created\ndeployment.apps/httpbin created\n", sidecarTLSHTTPBin, "-n", "test", "apply", "-f", "-")
	d.says("sidecar.networking.istio.io/ingress-sidecar created\n", sidecarTLSSidecar, "-n", "test", "apply", "-f", "-")

	// Verification: sleep in default (outside the mesh) and in test.
	d.kubectl("", "apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"))
	d.kubectl("", "-n", "test", "apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"))
	d.kubectl("", "wait", "--for=condition=ready", "pod", "-l", "app=sleep", "--timeout=120s")
	d.kubectl("", "-n", "test", "wait", "--for=condition=ready", "pod", "--all", "--timeout=120s")
	if out := d.kubectl("", "get", "pods"); !elided(out, "NAME                     READY   STATUS    RESTARTS   AGE\n...") || !strings.Contains(out, "1/1     Running") {
		t.Errorf("get pods (sleep outside the mesh, 1/1):\n%s", out)
	}
	if out := d.kubectl("", "get", "pods", "-n", "test"); strings.Count(out, "2/2     Running") != 2 {
		t.Errorf("get pods -n test (httpbin and sleep with sidecars, 2/2):\n%s", out)
	}
	if out := d.kubectl("", "get", "svc", "-n", "test"); !strings.Contains(out, "8443/TCP,8080/TCP") {
		t.Errorf("get svc -n test: no httpbin 8443/TCP,8080/TCP:\n%s", out)
	}

	httpbinPod := strings.TrimSpace(d.kubectl("", "-n", "test", "get", "pod", "-l", "app=httpbin", "-o", "jsonpath={.items..metadata.name}"))
	secrets := d.until("the sidecar's file-cert and file-root secrets", func() string {
		out, _ := meshlab(t, "--lab", d.name, "proxy-config", "secret", httpbinPod+".test")
		return out
	}, func(s string) bool { return strings.Contains(s, "file-root:/etc/istio/tls-ca-certs/ca.crt") })
	t.Logf("istioctl proxy-config secret %s.test:\n%s", httpbinPod, secrets)
	for _, row := range []string{"RESOURCE NAME", "file-cert:/etc/istio/tls-certs/tls.crt~/etc/istio/tls-certs/tls.key", "default ", "ROOTCA ", "file-root:/etc/istio/tls-ca-certs/ca.crt"} {
		if !strings.Contains(secrets, row) {
			t.Errorf("proxy-config secret has no %q row:\n%s", row, secrets)
		}
	}

	// Verify internal mesh connectivity on port 8080.
	internal := strings.TrimSpace(d.kubectl("", "-n", "test", "get", "pod", "-l", "app=sleep", "-o", "jsonpath={.items..metadata.name}"))
	got := d.until("200 from httpbin:8080 inside the mesh", func() string {
		out, _ := meshlab(t, "--lab", d.name, "-n", "test", "exec", internal, "-c", "sleep", "--", "curl", "-IsS", "http://httpbin:8080/status/200")
		return out
	}, func(s string) bool { return strings.HasPrefix(s, "HTTP/1.1 200 OK") })
	if !headersAsPage(got, "HTTP/1.1 200 OK", "server: envoy", "content-type: text/html; charset=utf-8", "access-control-allow-origin: *", "access-control-allow-credentials: true", "content-length: 0") {
		t.Errorf("curl -IsS http://httpbin:8080/status/200 in the mesh:\n%s\nwant the page's headers", got)
	}

	// Verify external to internal mesh connectivity on port 8443: the keys copied in.
	external := strings.TrimSpace(d.kubectl("", "get", "pod", "-l", "app=sleep", "-o", "jsonpath={.items..metadata.name}"))
	for _, line := range [][]string{
		{"cp", "client.test.svc.cluster.local.key", "default/" + external + ":/tmp/"},
		{"cp", "client.test.svc.cluster.local.crt", "default/" + external + ":/tmp/"},
		{"cp", "example.com.crt", "default/" + external + ":/tmp/ca.crt"},
	} {
		if out := run("", line...); out != "" {
			t.Errorf("meshlab %s printed %q (kubectl cp prints nothing)", strings.Join(line, " "), out)
		}
	}
	curl := func(url string) (string, int) {
		c := exec.Command(meshlabBin(t), "--lab", d.name, "exec", external, "-c", "sleep", "--", "curl", "-IsS", "--cacert", "/tmp/ca.crt",
			"--key", "/tmp/client.test.svc.cluster.local.key", "--cert", "/tmp/client.test.svc.cluster.local.crt",
			"-HHost:httpbin.test.svc.cluster.local", url)
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	got = d.until("HTTP/2 200 over mutual TLS from outside the mesh", func() string {
		out, _ := curl("https://httpbin.test.svc.cluster.local:8443/status/200")
		return out
	}, func(s string) bool { return strings.HasPrefix(s, "HTTP/2 200") })
	// The page's last line, x-envoy-decorator-operation: ingress-sidecar.test:9080/*, is
	// not printed: Envoy adds it to an inbound response only when the HCM traces, and
	// meshlab's generator sends no tracing block (istiod does, with enableTracing); the
	// route's decorator is the page's (golden istio-sidecar-ingress-tls).
	if !headersAsPage(got, "HTTP/2 200", "server: istio-envoy", "content-type: text/html; charset=utf-8", "access-control-allow-origin: *", "access-control-allow-credentials: true", "content-length: 0") {
		t.Errorf("curl https://httpbin.test.svc.cluster.local:8443/status/200 from outside:\n%s\nwant the page's headers", got)
	}
	out, code := curl("http://httpbin.test.svc.cluster.local:8080/status/200")
	if code != 56 || !elided(out, "curl: (56) Recv failure: Connection reset by peer\ncommand terminated with exit code 56") {
		t.Errorf("plaintext to 8080 from outside the mesh: exit %d\n%s\nwant the page's reset (curl 56)", code, out)
	}

	// Cleanup, as the page's.
	d.says("secret \"httpbin-mtls-termination\" deleted\nsecret \"httpbin-mtls-termination-cacert\" deleted\n", "", "delete", "secret", "httpbin-mtls-termination", "httpbin-mtls-termination-cacert", "-n", "test")
	d.kubectl("", "delete", "service", "httpbin", "sleep", "-n", "test")
	d.kubectl("", "delete", "deployment", "httpbin", "sleep", "-n", "test")
	d.kubectl("", "delete", "namespace", "test")
	d.kubectl("", "delete", "service", "sleep")
	d.kubectl("", "delete", "deployment", "sleep")
	d.kubectl("", "uninstall", "--purge", "-y")
}

// headersAsPage reports whether curl -I's output got has the page's status line first and
// each of its header lines (date and x-envoy-upstream-service-time vary, and are left
// out of want). The lines are compared as a set: meshlab's proxy writes a response's
// headers in Go's sorted order, Envoy in the order it holds them.
func headersAsPage(got, status string, headers ...string) bool {
	lines := strings.Split(strings.ReplaceAll(got, "\r", ""), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != status {
		return false
	}
	for _, h := range headers {
		if !slices.Contains(lines, h) {
			return false
		}
	}
	return true
}

const sidecarTLSStrict = `apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: default
spec:
  mtls:
    mode: STRICT
`

const sidecarTLSDisable9080 = `apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: disable-peer-auth-for-external-mtls-port
  namespace: test
spec:
  selector:
    matchLabels:
      app: httpbin
  mtls:
    mode: STRICT
  portLevelMtls:
    9080:
      mode: DISABLE
`

// sidecarTLSOpenSSL are the page's certificate lines, as written.
const sidecarTLSOpenSSL = `#CA is example.com
openssl req -x509 -sha256 -nodes -days 365 -newkey rsa:2048 -subj '/O=example Inc./CN=example.com' -keyout example.com.key -out example.com.crt
#Server is httpbin.test.svc.cluster.local
openssl req -out httpbin.test.svc.cluster.local.csr -newkey rsa:2048 -nodes -keyout httpbin.test.svc.cluster.local.key -subj "/CN=httpbin.test.svc.cluster.local/O=httpbin organization"
openssl x509 -req -days 365 -CA example.com.crt -CAkey example.com.key -set_serial 1 -in httpbin.test.svc.cluster.local.csr -out httpbin.test.svc.cluster.local.crt
#client is client.test.svc.cluster.local
openssl req -out client.test.svc.cluster.local.csr -newkey rsa:2048 -nodes -keyout client.test.svc.cluster.local.key -subj "/CN=client.test.svc.cluster.local/O=client organization"
openssl x509 -req -days 365 -CA example.com.crt -CAkey example.com.key -set_serial 1 -in client.test.svc.cluster.local.csr -out client.test.svc.cluster.local.crt
`

const sidecarTLSHTTPBin = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: httpbin
---
apiVersion: v1
kind: Service
metadata:
  name: httpbin
  labels:
    app: httpbin
    service: httpbin
spec:
  ports:
  - port: 8443
    name: https
    targetPort: 9080
  - port: 8080
    name: http
    targetPort: 9081
  selector:
    app: httpbin
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: httpbin
spec:
  replicas: 1
  selector:
    matchLabels:
      app: httpbin
      version: v1
  template:
    metadata:
      labels:
        app: httpbin
        version: v1
      annotations:
        sidecar.istio.io/userVolume: '{"tls-secret":{"secret":{"secretName":"httpbin-mtls-termination","optional":true}},"tls-ca-secret":{"secret":{"secretName":"httpbin-mtls-termination-cacert"}}}'
        sidecar.istio.io/userVolumeMount: '{"tls-secret":{"mountPath":"/etc/istio/tls-certs/","readOnly":true},"tls-ca-secret":{"mountPath":"/etc/istio/tls-ca-certs/","readOnly":true}}'
    spec:
      serviceAccountName: httpbin
      containers:
      - image: docker.io/kennethreitz/httpbin
        imagePullPolicy: IfNotPresent
        name: httpbin
        ports:
        - containerPort: 80
`

const sidecarTLSSidecar = `apiVersion: networking.istio.io/v1alpha3
kind: Sidecar
metadata:
  name: ingress-sidecar
  namespace: test
spec:
  workloadSelector:
    labels:
      app: httpbin
      version: v1
  ingress:
  - port:
      number: 9080
      protocol: HTTPS
      name: external
    defaultEndpoint: 0.0.0.0:80
    tls:
      mode: MUTUAL
      privateKey: "/etc/istio/tls-certs/tls.key"
      serverCertificate: "/etc/istio/tls-certs/tls.crt"
      caCertificates: "/etc/istio/tls-ca-certs/ca.crt"
  - port:
      number: 9081
      protocol: HTTP
      name: internal
    defaultEndpoint: 0.0.0.0:80
`
