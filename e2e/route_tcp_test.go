package e2e

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestRouteTCPShiftingGatewayAPI walks istio.io's "TCP Traffic Shifting" in its Gateway
// API form: Istio's sleep and tcp-echo samples in the task's namespace,
// samples/tcp-echo/gateway-api/tcp-echo-all-v1.yaml (a Gateway of class istio with a TCP
// listener tcp-31400, Services tcp-echo-v1 and tcp-echo-v2, a v1alpha2 TCPRoute all to
// v1), INGRESS_HOST and TCP_INGRESS_PORT from the Gateway's status and listener, the
// page's `(date; sleep 1) | nc $INGRESS_HOST $TCP_INGRESS_PORT` loop answering "one",
// then tcp-echo-20-v2.yaml (the TCPRoute 80/20) after which both answer, "one" the more.
func TestRouteTCPShiftingGatewayAPI(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	d := startDocsLab(t)
	const ns = "istio-io-tcp-traffic-shifting"

	d.run("install", "--set", "profile=minimal", "-y")
	d.says("namespace/"+ns+" created\n", "", "create", "namespace", ns)
	d.run("apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"), "-n", ns)
	d.run("apply", "-f", filepath.Join(samples, "tcp-echo/tcp-echo-services.yaml"), "-n", ns)
	d.says("gateway.gateway.networking.k8s.io/tcp-echo-gateway created\nservice/tcp-echo-v1 created\nservice/tcp-echo-v2 created\ntcproute.gateway.networking.k8s.io/tcp-echo created\n", "",
		"apply", "-f", filepath.Join(samples, "tcp-echo/gateway-api/tcp-echo-all-v1.yaml"), "-n", ns)
	d.says("gateway.gateway.networking.k8s.io/tcp-echo-gateway condition met\n", "", "wait", "--for=condition=programmed", "gtw", "tcp-echo-gateway", "-n", ns, "--timeout=60s")
	host := d.kubectl("", "get", "gtw", "tcp-echo-gateway", "-n", ns, "-o", "jsonpath={.status.addresses[0].value}")
	port := d.kubectl("", "get", "gtw", "tcp-echo-gateway", "-n", ns, "-o", `jsonpath={.spec.listeners[?(@.name=="tcp-31400")].port}`)
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`).MatchString(host) || port != "31400" {
		t.Fatalf("INGRESS_HOST=%q TCP_INGRESS_PORT=%q; want the Gateway's address and 31400", host, port)
	}
	echo := d.tcpEcho(ns, host, port)
	echo.allToV1()

	d.says("tcproute.gateway.networking.k8s.io/tcp-echo configured\n", "", "apply", "-f", filepath.Join(samples, "tcp-echo/gateway-api/tcp-echo-20-v2.yaml"), "-n", ns)
	route := d.kubectl("", "get", "tcproute", "tcp-echo", "-o", "yaml", "-n", ns)
	// The page's output: the API server's CRD defaults (parentRef group and kind,
	// backendRef group and kind) in what it returns.
	if !elided(route, `...
spec:
  parentRefs:
  - group: gateway.networking.k8s.io
    kind: Gateway
    name: tcp-echo-gateway
    sectionName: tcp-31400
  rules:
  - backendRefs:
    - group: ""
      kind: Service
      name: tcp-echo-v1
      port: 9000
      weight: 80
    - group: ""
      kind: Service
      name: tcp-echo-v2
      port: 9000
      weight: 20
...`) {
		t.Errorf("get tcproute tcp-echo -o yaml:\n%s\nwant the page's 80/20 route", route)
	}
	echo.shifted()
	d.run("delete", "-f", filepath.Join(samples, "tcp-echo/gateway-api/tcp-echo-all-v1.yaml"), "-n", ns)
}
