package e2e

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestKubectlJSONPathAndWait runs the kubectl lines Istio's ingress tasks use, as
// `meshlab` lines: `wait --for=condition=programmed gtw/...`, `wait
// --for=condition=available deploy/...`, `wait --for=condition=ready pod -l ...`, the
// ingress gateway's `{.status.loadBalancer.ingress[0].ip}` and
// `{.spec.ports[?(@.name=="http2")].port}`, the Gateway API Gateway's
// `{.status.addresses[0].value}` and `get pod -l app=curl -o
// jsonpath={.items..metadata.name}`; the addresses they print carry requests from a pod.
func TestKubectlJSONPathAndWait(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-samples.yaml")
	run := func(args ...string) string {
		t.Helper()
		out, err := meshlab(t, append(args[:1:1], append([]string{"--name", l.name}, args[1:]...)...)...)
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	applyYAML(t, l.name, `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: httpbin-gateway
spec:
  selector:
    istio: ingressgateway
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - "httpbin.example.com"
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: httpbin
spec:
  hosts:
  - "httpbin.example.com"
  gateways:
  - httpbin-gateway
  http:
  - match:
    - uri:
        prefix: /status
    route:
    - destination:
        port:
          number: 8000
        host: httpbin
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: api-gateway
spec:
  gatewayClassName: istio
  listeners:
  - name: http
    hostname: "api.example.com"
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Same
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: httpbin
spec:
  parentRefs:
  - name: api-gateway
  hostnames: ["api.example.com"]
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /status
    backendRefs:
    - name: httpbin
      port: 8000
`)
	if out := run("wait", "--for=condition=programmed", "gtw/api-gateway", "--timeout=60s"); out != "gateway.gateway.networking.k8s.io/api-gateway condition met\n" {
		t.Fatalf("wait gtw: %q", out)
	}
	if out := run("wait", "--for=condition=available", "deployment/istio-ingressgateway", "-n", "istio-system", "--timeout=60s"); out != "deployment.apps/istio-ingressgateway condition met\n" {
		t.Fatalf("wait deploy: %q", out)
	}
	out := run("wait", "--for=condition=ready", "pod", "-l", "app=curl", "--timeout=60s")
	if !regexp.MustCompile(`^pod/curl-[a-z0-9]+-[a-z0-9]{5} condition met\n$`).MatchString(out) {
		t.Fatalf("wait pod -l app=curl: %q", out)
	}
	// A condition that does not come: kubectl's timeout error, exit status 1.
	bad, err := meshlab(t, "wait", "--name", l.name, "--for=condition=ready=false", "deploy/curl", "--timeout=1s")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(bad, "timed out waiting for the condition on deployments/curl") {
		t.Fatalf("wait for what does not come: %v\n%s", err, bad)
	}

	pod := run("get", "pod", "-l", "app=curl", "-o", "jsonpath={.items..metadata.name}")
	if !regexp.MustCompile(`^curl-[a-z0-9]+-[a-z0-9]{5}$`).MatchString(pod) {
		t.Fatalf("SOURCE_POD=%q", pod)
	}
	// kubectl -n istio-system get service ..., the docs' order: -n before the verb.
	hostOut, err := meshlab(t, "-n", "istio-system", "get", "--name", l.name, "service", "istio-ingressgateway", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
	if err != nil {
		t.Fatalf("meshlab -n istio-system get service: %v\n%s", err, hostOut)
	}
	host := hostOut
	port := run("get", "-n", "istio-system", "service", "istio-ingressgateway", "-o", `jsonpath={.spec.ports[?(@.name=="http2")].port}`)
	if !regexp.MustCompile(`^10\.96\.\d+\.\d+$`).MatchString(host) || port != "80" {
		t.Fatalf("INGRESS_HOST=%q INGRESS_PORT=%q", host, port)
	}
	gw := run("get", "gtw", "api-gateway", "-o", "jsonpath={.status.addresses[0].value}")
	if !regexp.MustCompile(`^10\.96\.\d+\.\d+$`).MatchString(gw) || gw == host {
		t.Fatalf("Gateway API INGRESS_HOST=%q (istio-ingressgateway at %s)", gw, host)
	}
	for _, c := range []struct{ host, addr string }{{"httpbin.example.com", host + ":" + port}, {"api.example.com", gw + ":80"}} {
		code, exit := execIn(t, l.name, nil, pod, "curl", "-s", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host:"+c.host, "http://"+c.addr+"/status/418")
		if code != "418" {
			t.Errorf("curl -H Host:%s http://%s/status/418 from %s: %q, exit %d", c.host, c.addr, pod, code, exit)
		}
	}
	// -l in the text form selects as the jsonpath form does.
	if out := run("get", "pods", "-l", "app=curl"); !strings.Contains(out, pod) || strings.Contains(out, "httpbin") {
		t.Fatalf("get pods -l app=curl:\n%s", out)
	}
	if out := run("get", "gtw"); !regexp.MustCompile(`api-gateway\s+istio\s+` + regexp.QuoteMeta(gw) + `\s+True`).MatchString(out) {
		t.Fatalf("get gtw:\n%s", out)
	}
}
