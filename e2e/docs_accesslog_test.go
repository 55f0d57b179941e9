package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// telemetryMeshDefault is the Access Logs task's Telemetry, as the page applies it with
// `kubectl apply -n istio-system -f -`.
const telemetryMeshDefault = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  accessLogging:
    - providers:
      - name: envoy
`

// TestDocsAccessLogsTask walks istio.io's "Envoy Access Logs" task as the page writes it,
// on Istio's sample files from the module cache, each command changed only from
// kubectl/istioctl to meshlab: a default-profile install (no access logs), the curl and
// httpbin samples, the Telemetry API's mesh-default turning the envoy provider on,
// `exec $SOURCE_POD -c curl -- curl -sS -v httpbin:8000/status/418` (go-httpbin's
// teapot), then `logs -l app=curl -c istio-proxy` and `logs -l app=httpbin -c
// istio-proxy` showing the outbound and inbound lines of that request in Istio's TEXT
// format. Then the page's other way, `install --set meshConfig.accessLogFile=/dev/stdout`
// after `delete telemetry mesh-default -n istio-system`, and its cleanup `delete -f`.
func TestDocsAccessLogsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	l, run := startTaskLab(t)
	// within polls f until it reports done, for at most d (the lab's pods and proxies
	// converge in their own time on a loaded machine).
	within := func(what string, d time.Duration, f func() (string, bool)) string {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			out, done := f()
			if done {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; last:\n%s", what, d, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// Istio's default profile logs no access; the task starts from it.
	if out := run("install", "--set", "profile=default", "-y"); !strings.HasSuffix(out, "✔ Installation complete\nMade this installation the default for injection and validation.\n") {
		t.Errorf("install --set profile=default -y:\n%s", out)
	}
	run("label", "namespace", "default", "istio-injection=enabled")
	if out := run("apply", "-f", filepath.Join(samples, "curl/curl.yaml")); !strings.Contains(out, "deployment.apps/curl created\n") {
		t.Errorf("apply curl.yaml:\n%s", out)
	}
	if out := run("apply", "-f", filepath.Join(samples, "httpbin/httpbin.yaml")); !strings.Contains(out, "deployment.apps/httpbin created\n") {
		t.Errorf("apply httpbin.yaml:\n%s", out)
	}
	source := within("SOURCE_POD", 30*time.Second, func() (string, bool) {
		out, err := meshlab(t, "--lab", l.name, "get", "pod", "-l", "app=curl", "-o", "jsonpath={.items..metadata.name}")
		return strings.TrimSpace(out), err == nil && strings.HasPrefix(strings.TrimSpace(out), "curl-")
	})
	teapot := func() (string, bool) {
		out, err := meshlab(t, "--lab", l.name, "exec", source, "-c", "curl", "--", "curl", "-sS", "-v", "httpbin:8000/status/418")
		return out, err == nil && strings.Contains(out, "< HTTP/1.1 418") && strings.Contains(out, "I'm a teapot!")
	}
	within("curl -sS -v httpbin:8000/status/418 before any access log", 30*time.Second, teapot)
	const outbound = `"GET /status/418 HTTP/1.1" 418 `
	if out := run("logs", "-l", "app=curl", "-c", "istio-proxy"); strings.Contains(out, outbound) {
		t.Errorf("logs -l app=curl -c istio-proxy after a default-profile install:\n%s\nwant no access log line", out)
	}

	cmd := exec.Command(meshlabBin(t), "--lab", l.name, "apply", "-n", "istio-system", "-f", "-")
	cmd.Stdin = strings.NewReader(telemetryMeshDefault)
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "telemetry.telemetry.istio.io/mesh-default created\n" {
		t.Fatalf("apply -n istio-system -f - (Telemetry mesh-default): %v\n%s", err, out)
	}
	// The proxies log once they run the Telemetry: ask until the request's line shows.
	logged := func(selector, want string) func() (string, bool) {
		return func() (string, bool) {
			if _, ok := teapot(); !ok {
				return "the request failed", false
			}
			out, err := meshlab(t, "--lab", l.name, "logs", "-l", selector, "-c", "istio-proxy")
			return out, err == nil && strings.Contains(out, want)
		}
	}
	line := within("logs -l app=curl -c istio-proxy with the Telemetry", 30*time.Second, logged("app=curl", outbound))
	for _, want := range []string{`"httpbin:8000"`, " outbound|8000||httpbin.default.svc.cluster.local ", `"curl/`} {
		if !strings.Contains(line, want) {
			t.Errorf("logs -l app=curl -c istio-proxy:\n%s\nwant the outbound line to hold %q", line, want)
		}
	}
	line = within("logs -l app=httpbin -c istio-proxy with the Telemetry", 30*time.Second, logged("app=httpbin", outbound))
	if !strings.Contains(line, " inbound|8080|| ") || !strings.Contains(line, "outbound_.8000_._.httpbin.default.svc.cluster.local") {
		t.Errorf("logs -l app=httpbin -c istio-proxy:\n%s\nwant the inbound line with the mTLS hop's SNI", line)
	}

	// The page's other way: MeshConfig's accessLogFile, set by istioctl install.
	if out := run("delete", "telemetry", "mesh-default", "-n", "istio-system"); !strings.Contains(out, `telemetry.telemetry.istio.io "mesh-default" deleted`) {
		t.Errorf("delete telemetry mesh-default -n istio-system:\n%s", out)
	}
	run("install", "--set", "meshConfig.accessLogFile=/dev/stdout", "-y")
	count := func() int {
		out, _ := meshlab(t, "--lab", l.name, "logs", "-l", "app=curl", "-c", "istio-proxy", "--tail=-1")
		return strings.Count(out, outbound)
	}
	before := count()
	within("logs -l app=curl -c istio-proxy with meshConfig.accessLogFile=/dev/stdout", 30*time.Second, func() (string, bool) {
		teapot()
		n := count()
		return strings.Repeat("line\n", n), n > before
	})

	// Cleanup, as the page's.
	if out := run("delete", "-f", filepath.Join(samples, "curl/curl.yaml")); !strings.Contains(out, `deployment.apps "curl" deleted`) {
		t.Errorf("delete -f curl.yaml:\n%s", out)
	}
	if out := run("delete", "-f", filepath.Join(samples, "httpbin/httpbin.yaml")); !strings.Contains(out, `deployment.apps "httpbin" deleted`) {
		t.Errorf("delete -f httpbin.yaml:\n%s", out)
	}
}
