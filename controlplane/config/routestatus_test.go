package config

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
)

// meshRoute is a GAMMA HTTPRoute: httpbin's traffic in the mesh, its port 8000, a header
// match then a weighted split with timeouts and retry.
const meshRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: mesh
spec:
  parentRefs:
  - {group: "", kind: Service, name: httpbin, port: 8000}
  - {name: httpbin-gateway, namespace: istio-ingress}
  - {name: nowhere}
  rules:
  - matches:
    - headers: [{name: end-user, value: jason}]
    backendRefs: [{name: httpbin, port: 8000}]
  - backendRefs: [{name: httpbin, port: 8000}]
    timeouts: {request: 3s, backendRequest: 1s}
    retry: {attempts: 3, codes: [503]}
`

// TestMeshRouteAsIstiod: an HTTPRoute with a Service parent becomes istiod's mesh
// VirtualService for the Service's host (its port in every match, rules named, timeouts
// and retry converted), and its status says Accepted for each parent it binds.
func TestMeshRouteAsIstiod(t *testing.T) {
	t.Parallel()
	s, err := Load("gw.yaml", []byte(docs(httpbinManifest, httpbinGatewayAPI, meshRoute)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var vs *networking.VirtualService
	for _, o := range gatewayAPIIstio(s.Objects) {
		if o.Origin.Name == "default~8000~httpbin.default.svc.cluster.local" {
			vs = o.VirtualService
		}
	}
	if vs == nil {
		t.Fatal("no mesh VirtualService default~8000~httpbin.default.svc.cluster.local")
	}
	if len(vs.GetGateways()) != 1 || vs.GetGateways()[0] != "mesh" || vs.GetHosts()[0] != "httpbin.default.svc.cluster.local" || len(vs.GetHttp()) != 2 {
		t.Fatalf("mesh VirtualService %v", vs)
	}
	h := vs.GetHttp()
	if h[0].GetName() != "default.mesh.0" || h[0].GetMatch()[0].GetPort() != 8000 || h[0].GetMatch()[0].GetHeaders()["end-user"].GetExact() != "jason" {
		t.Errorf("first route %v", h[0])
	}
	want := &networking.HTTPRetry{Attempts: 3, RetryOn: "connect-failure,refused-stream,unavailable,cancelled,503", PerTryTimeout: durationpb.New(1e9)}
	if !proto.Equal(h[1].GetRetries(), want) || h[1].GetTimeout().AsDuration().Seconds() != 3 {
		t.Errorf("second route: retries %v timeout %v, want %v and 3s", h[1].GetRetries(), h[1].GetTimeout(), want)
	}
	var route *Object
	for _, o := range s.Objects {
		if o.HTTPRoute != nil && o.Origin.Name == "mesh" {
			route = o
		}
	}
	st := RouteStatus(s.Objects, route)
	if len(st.Parents) != 3 {
		t.Fatalf("%d parents in status, want 3", len(st.Parents))
	}
	for i, want := range []string{"Accepted", "Accepted", "NoMatchingParent"} {
		c := st.Parents[i].Conditions[0]
		if c.Type != "Accepted" || c.Reason != want || string(st.Parents[i].ControllerName) != istioGatewayController {
			t.Errorf("parent %d: %s %s %s (%s), want reason %s", i, st.Parents[i].ControllerName, c.Type, c.Status, c.Reason, want)
		}
	}
}
