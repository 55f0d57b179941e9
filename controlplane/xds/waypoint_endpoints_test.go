package xds

import (
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// mixedWaypointScenario is a namespace waypoint in front of a service whose pods are
// not all in the ambient mesh: one enrolled, one labelled out (dataplane-mode none),
// one with a sidecar, one out of the mesh that speaks HBONE natively.
const mixedWaypointScenario = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: shop}
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - {name: mesh, port: 15008, protocol: HBONE}
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-ambient, namespace: shop}
spec:
  selector: {matchLabels: {app: web, version: ambient}}
  template:
    metadata: {labels: {app: web, version: ambient}}
    spec: {containers: [{name: web, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-none, namespace: shop}
spec:
  selector: {matchLabels: {app: web, version: none}}
  template:
    metadata: {labels: {app: web, version: none, istio.io/dataplane-mode: none}}
    spec: {containers: [{name: web, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-sidecar, namespace: shop}
spec:
  selector: {matchLabels: {app: web, version: sidecar}}
  template:
    metadata: {labels: {app: web, version: sidecar, sidecar.istio.io/inject: "true"}}
    spec: {containers: [{name: web, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-native, namespace: shop}
spec:
  selector: {matchLabels: {app: web, version: native}}
  template:
    metadata: {labels: {app: web, version: native, istio.io/dataplane-mode: none, networking.istio.io/tunnel: http}}
    spec: {containers: [{name: web, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
`

// TestWaypointEndpointsByTunnel holds the waypoint's inbound-vip endpoints to istiod's
// (fidelity scenario ambient-waypoint-mixed): HBONE through connect_originate only to
// the pods that speak it (enrolled and redirected, or natively), the pod's own address
// (plaintext) to the others, a sidecar's with its tlsMode mark. Dialled over HBONE, the
// others answered 503 UC.
func TestWaypointEndpointsByTunnel(t *testing.T) {
	t.Parallel()
	m := buildWaypointModel(t, "mixed.yaml", []byte(mixedWaypointScenario))
	res, err := GenerateWaypoint(m, shopWaypoint(t, m))
	if err != nil {
		t.Fatal(err)
	}
	name := InboundVIPClusterName(80, "http", "web.shop.svc.cluster.local")
	var cla *endpoint.ClusterLoadAssignment
	for _, r := range res[resource.EndpointType] {
		if c := r.(*endpoint.ClusterLoadAssignment); c.GetClusterName() == name {
			cla = c
		}
	}
	if cla == nil || len(cla.GetEndpoints()) != 1 {
		t.Fatalf("no load assignment %s with one locality: %v", name, cla)
	}
	byVersion := map[string]*model.Pod{}
	for _, p := range m.Pods {
		if p.Labels["app"] == "web" {
			byVersion[p.Labels["version"]] = p
		}
	}
	got := map[string]*endpoint.LbEndpoint{}
	for _, e := range cla.GetEndpoints()[0].GetLbEndpoints() {
		for v, p := range byVersion {
			target := p.IP.String() + ":8080"
			if e.GetEndpoint().GetAddress().GetEnvoyInternalAddress().GetEndpointId() == target ||
				e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == p.IP.String() {
				got[v] = e
			}
		}
	}
	for _, tc := range []struct {
		version string
		hbone   bool
		tlsMode bool
	}{
		{version: "ambient", hbone: true},
		{version: "native", hbone: true},
		{version: "none"},
		{version: "sidecar", tlsMode: true},
	} {
		e := got[tc.version]
		if e == nil {
			t.Errorf("web-%s: no endpoint", tc.version)
			continue
		}
		addr := e.GetEndpoint().GetAddress()
		md := e.GetMetadata().GetFilterMetadata()
		if tc.hbone {
			if ia := addr.GetEnvoyInternalAddress(); ia.GetServerListenerName() != ConnectOriginateListener {
				t.Errorf("web-%s: address %v, want the internal listener %s (HBONE)", tc.version, addr, ConnectOriginateListener)
			}
			if md[originalDstMetadata].GetFields()["local"].GetStringValue() != byVersion[tc.version].IP.String()+":8080" {
				t.Errorf("web-%s: original_dst metadata %v", tc.version, md[originalDstMetadata])
			}
			continue
		}
		if sa := addr.GetSocketAddress(); sa.GetAddress() != byVersion[tc.version].IP.String() || sa.GetPortValue() != 8080 {
			t.Errorf("web-%s: address %v, want the pod's own %s:8080 (plaintext, no HBONE)", tc.version, addr, byVersion[tc.version].IP)
		}
		if md[originalDstMetadata] != nil {
			t.Errorf("web-%s: original_dst metadata %v on a plain endpoint", tc.version, md[originalDstMetadata])
		}
		if md["istio"].GetFields()["workload"].GetStringValue() == "" {
			t.Errorf("web-%s: no istio workload metadata", tc.version)
		}
		if has := md[TransportSocketMatchKey].GetFields()[TLSModeKey].GetStringValue() == TLSModeIstio; has != tc.tlsMode {
			t.Errorf("web-%s: tlsMode istio mark %v, want %v", tc.version, has, tc.tlsMode)
		}
	}
}
