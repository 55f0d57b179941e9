package lab

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
)

// printGatewayURL lists istio-ingressgateway and each Gateway API Gateway's automated
// deployment, each on its own local port, with the Gateway's first listener port.
func TestPrintGatewayURLGatewayAPI(t *testing.T) {
	const scenario = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bookinfo-gateway}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: httpbin-gateway, namespace: istio-ingress}
spec:
  gatewayClassName: istio
  listeners: [{name: web, port: 8000, protocol: HTTP}]
`
	s, err := config.Load("gw.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printGatewayURL(&b, "demo", m)
	want := `ingress gateway: meshlab port-forward --name demo -n istio-system svc/istio-ingressgateway 8080:80 &
  then export GATEWAY_URL=127.0.0.1:8080 (INGRESS_HOST=127.0.0.1, INGRESS_PORT=8080)
Gateway istio-ingress/httpbin-gateway: meshlab port-forward --name demo -n istio-ingress svc/httpbin-gateway-istio 8081:8000 &
  then export GATEWAY_URL=127.0.0.1:8081
`
	if b.String() != want {
		t.Errorf("printGatewayURL:\n%s\nwant:\n%s", b.String(), want)
	}
}
