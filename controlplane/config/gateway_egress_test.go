package config

import (
	"strings"
	"testing"
)

// The egress gateway task routes sidecars to the gateway Service istioctl makes
// (istio-egressgateway.istio-system.svc.cluster.local): a Gateway selecting
// `istio: egressgateway` brings it, so a VirtualService may name it, with the task's
// http matches on gateways and port; without such a Gateway the name is nobody's.
func TestEgressGatewayServiceIsNameable(t *testing.T) {
	t.Parallel()
	const gw = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: istio-egressgateway}
spec:
  selector: {istio: egressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [edition.cnn.com]
---
`
	const rest = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cnn}
spec:
  hosts: [edition.cnn.com]
  ports: [{number: 80, name: http-port, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: direct-cnn-through-egress-gateway}
spec:
  hosts: [edition.cnn.com]
  gateways: [istio-egressgateway, mesh]
  http:
  - match: [{gateways: [mesh], port: 80}]
    route: [{destination: {host: istio-egressgateway.istio-system.svc.cluster.local, port: {number: 80}}}]
  - match: [{gateways: [istio-egressgateway], port: 80}]
    route: [{destination: {host: edition.cnn.com, port: {number: 80}}}]
`
	if _, err := Load("t.yaml", []byte(gw+rest)); err != nil {
		t.Fatalf("Load with the Gateway: %v", err)
	}
	_, err := Load("t.yaml", []byte(rest))
	const want = `spec.http[0].route[0].destination.host: "istio-egressgateway.istio-system.svc.cluster.local" names no Service or ServiceEntry`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load without a Gateway = %v, want %q", err, want)
	}
}
