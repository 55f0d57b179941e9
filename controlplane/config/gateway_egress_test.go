package config

import "testing"

// The egress gateway task routes sidecars to the gateway Service istioctl makes
// (istio-egressgateway.istio-system.svc.cluster.local): a Gateway selecting
// `istio: egressgateway` brings it, so a VirtualService may name it, with the task's
// http matches on gateways and port. Without such a Gateway (the task's cleanup deletes
// the Gateway before the VirtualService) the VirtualService is still accepted, as
// Kubernetes keeps it: its route names a cluster nobody has.
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
	sc, err := Load("t.yaml", []byte(rest))
	if err != nil {
		t.Fatalf("Load without a Gateway (deleted first, as the task's cleanup does) = %v, want it accepted", err)
	}
	m, err := sc.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var dest string
	for _, vs := range m.Istio.VirtualServices {
		dest = vs.Spec.GetHttp()[0].GetRoute()[0].GetDestination().GetHost()
	}
	if dest != "istio-egressgateway.istio-system.svc.cluster.local" {
		t.Fatalf("the route's destination in the model = %q", dest)
	}
}

// A destination naming nothing becomes the FQDN istiod would make of it, while a
// gateway's hosts ("*", the names clients use) stay as written.
func TestDanglingDestinationKeepsGatewayHosts(t *testing.T) {
	t.Parallel()
	const vs = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs}
spec:
  hosts: ["*"]
  gateways: [gw]
  http: [{route: [{destination: {host: nowhere, port: {number: 80}}}]}]
`
	sc, err := Load("t.yaml", []byte(vs))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := sc.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	spec := m.Istio.VirtualServices[0].Spec
	if spec.GetHosts()[0] != "*" || spec.GetHttp()[0].GetRoute()[0].GetDestination().GetHost() != "nowhere.default.svc.cluster.local" {
		t.Fatalf("hosts %v destination %q: want * kept and nowhere.default.svc.cluster.local", spec.GetHosts(), spec.GetHttp()[0].GetRoute()[0].GetDestination().GetHost())
	}
}
