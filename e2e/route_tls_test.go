package e2e

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// tlsRouteGateway is the passthrough task's Gateway in the Gateway API: a TLS listener on
// 443 in mode Passthrough, and a v1alpha2 TLSRoute (the version Istio's docs write) for
// SNI nginx.example.com to my-nginx:443.
const tlsRouteGateway = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: mygateway
spec:
  gatewayClassName: istio
  listeners:
  - name: tls
    hostname: "nginx.example.com"
    port: 443
    protocol: TLS
    tls:
      mode: Passthrough
    allowedRoutes:
      namespaces:
        from: Same
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata:
  name: nginx
spec:
  parentRefs:
  - name: mygateway
  hostnames:
  - "nginx.example.com"
  rules:
  - backendRefs:
    - name: my-nginx
      port: 443
`

// TestRouteTLSPassthroughGatewayAPI runs TLS passthrough through a Gateway API gateway
// with a TLSRoute, as istiod converts it (a PASSTHROUGH server and a VirtualService tls
// route by SNI): nginx's welcome page with nginx's own certificate through the Gateway's
// automated deployment, no TLS for another server name, `get tlsroute` with kubectl's
// columns and the route Accepted by its parent.
func TestRouteTLSPassthroughGatewayAPI(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, writeTemp(t, "nginx.yaml", nginxManifest))
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", writeTemp(t, "gateway.yaml", tlsRouteGateway)); err != nil {
		t.Fatalf("apply Gateway and TLSRoute: %v\n%s", err, out)
	}
	nginxPassthrough(t, portForwardSvc(t, l.name, "default", "svc/mygateway-istio", "443"))
	out := mustMeshlab(t, "--lab", l.name, "get", "tlsroute")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "nginx ") {
		t.Errorf("get tlsroute:\n%s\nwant NAME AGE and the route", out)
	}
	status := mustMeshlab(t, "--lab", l.name, "get", "tlsroute", "nginx", "-o", `jsonpath={.status.parents[0].conditions[?(@.type=="Accepted")].status}`)
	if status != "True" {
		t.Errorf("TLSRoute nginx Accepted = %q, want True", status)
	}
}
