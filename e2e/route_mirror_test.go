package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestMirroringTaskGatewayAPI is the Gateway API form of Istio's "Mirroring" task: the
// Services httpbin-v1 and httpbin-v2, and an HTTPRoute on the httpbin Service (GAMMA)
// that sends every request to httpbin-v1 and mirrors it to httpbin-v2 with a
// RequestMirror filter (istiod's mirrors): v2's sidecar logs the mirrored request (the
// authority httpbin-shadow:8000) and the client gets its answer.
func TestMirroringTaskGatewayAPI(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/tasks/mirroring.yaml")
	applyYAML(t, l.name, `apiVersion: v1
kind: Service
metadata:
  name: httpbin-v1
spec:
  ports:
  - port: 80
    name: http
  selector:
    app: httpbin
    version: v1
---
apiVersion: v1
kind: Service
metadata:
  name: httpbin-v2
spec:
  ports:
  - port: 80
    name: http
  selector:
    app: httpbin
    version: v2
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: httpbin
spec:
  parentRefs:
  - group: ""
    kind: Service
    name: httpbin
    port: 8000
  rules:
  - filters:
    - type: RequestMirror
      requestMirror:
        backendRef:
          name: httpbin-v2
          port: 80
    backendRefs:
    - name: httpbin-v1
      port: 80
`)
	pod := func(deploy string) string {
		t.Helper()
		out, code := execIn(t, l.name, nil, "deploy/"+deploy, "hostname")
		if code != 0 {
			t.Fatalf("hostname in deploy/%s: exit %d\n%s", deploy, code, out)
		}
		return strings.TrimSpace(out)
	}
	v2 := pod("httpbin-v2")
	shadowed := func() bool {
		t.Helper()
		out, err := meshlab(t, "logs", "--name", l.name, v2, "-c", "proxy")
		if err != nil {
			t.Fatalf("meshlab logs %s -c proxy: %v\n%s", v2, err, out)
		}
		return strings.Contains(out, "httpbin-shadow:8000")
	}
	// Until the route reaches the client's sidecar, a request goes to either version
	// unmirrored; then each one is answered by v1 and copied to v2 with the authority
	// httpbin-shadow:8000 (v2's sidecar access log).
	deadline := time.Now().Add(45 * time.Second)
	for !shadowed() {
		if time.Now().After(deadline) {
			t.Fatal("45 s after the HTTPRoute, httpbin v2's sidecar has logged no mirrored request (authority httpbin-shadow:8000)")
		}
		out, code := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "http://httpbin:8000/headers")
		if code != 0 {
			t.Fatalf("curl /headers: exit %d\n%s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The client gets v1's answer.
	if out, code := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "http://httpbin:8000/headers"); code != 0 || !strings.Contains(out, `"Host": "httpbin:8000"`) {
		t.Errorf("curl /headers: exit %d\n%s\nwant the answer for Host httpbin:8000", code, out)
	}
}
