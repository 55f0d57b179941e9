package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// waypointScenario is Istio's Getting Started in ambient at L7: namespace default
// enrolled and using the waypoint istioctl waypoint apply --enroll-namespace makes, a
// workload-only waypoint "wl" in namespace apps, and objects that opt in and out.
const waypointScenario = `apiVersion: v1
kind: Namespace
metadata:
  name: default
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: default}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: wl
  namespace: apps
  labels: {istio.io/waypoint-for: workload}
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - name: mesh
    port: 15008
    protocol: HBONE
    allowedRoutes: {namespaces: {from: All}}
---
apiVersion: v1
kind: Service
metadata: {name: reviews}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata:
  name: ratings
  labels: {istio.io/use-waypoint: none}
spec:
  selector: {app: ratings}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: ratings
  labels: {app: ratings}
spec:
  containers: [{name: ratings, image: docker.io/istio/examples-bookinfo-ratings-v1:1.20.3}]
---
apiVersion: v1
kind: Pod
metadata:
  name: reviews
  labels: {app: reviews, istio.io/use-waypoint: wl, istio.io/use-waypoint-namespace: apps}
spec:
  containers: [{name: reviews, image: docker.io/istio/examples-bookinfo-reviews-v1:1.20.3}]
`

func buildWaypoints(t *testing.T, yaml string) *model.Model {
	t.Helper()
	s, err := Load("wp.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.1.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return m
}

func TestWaypointDeployment(t *testing.T) {
	m := buildWaypoints(t, waypointScenario)
	if len(m.Waypoints) != 2 {
		t.Fatalf("waypoints: got %d, want 2", len(m.Waypoints))
	}
	wl, wp := m.Waypoints[0], m.Waypoints[1] // apps/wl, default/waypoint
	if wl.ResourceName() != "apps/wl" || wl.For != "workload" || wl.From != "All" {
		t.Errorf("apps/wl: got %+v", wl)
	}
	if wp.ResourceName() != "default/waypoint" || wp.For != "service" || wp.From != "Same" {
		t.Errorf("default/waypoint: got %+v", wp)
	}
	svc := m.WaypointService(wp)
	if svc == nil {
		t.Fatal("no Service default/waypoint")
	}
	if len(svc.Ports) != 2 || svc.Ports[1] != (model.ServicePort{Name: "mesh", Port: 15008, TargetPort: 15008, Protocol: model.ProtocolTCP, AppProtocol: "hbone"}) ||
		svc.Ports[0].Name != "status-port" || svc.Ports[0].AppProtocol != "tcp" {
		t.Errorf("Service ports: got %+v", svc.Ports)
	}
	if svc.Labels[model.LabelGatewayManaged] != model.ManagedByMeshController || svc.Selector[model.GatewayAPINameLabel] != "waypoint" {
		t.Errorf("Service labels %v selector %v", svc.Labels, svc.Selector)
	}
	pods := m.WaypointPods(wp)
	if len(pods) != 1 {
		t.Fatalf("waypoint pods: got %d, want 1", len(pods))
	}
	p := pods[0]
	if !strings.HasPrefix(p.Name, "waypoint-") || p.ServiceAccount != "waypoint" || !p.Router || !p.Waypoint || !p.IP.IsValid() {
		t.Errorf("pod: got %+v", p)
	}
	for k, v := range map[string]string{
		"istio.io/dataplane-mode": "none", "gateway.networking.k8s.io/gateway-name": "waypoint",
		"gateway.istio.io/managed": "istio.io-mesh-controller", "gateway.networking.k8s.io/gateway-class-name": "istio-waypoint",
		"service.istio.io/canonical-name": "waypoint",
	} {
		if p.Labels[k] != v {
			t.Errorf("pod label %s: got %q, want %q", k, p.Labels[k], v)
		}
	}
	if got := p.NodeID(); !strings.HasPrefix(got, "waypoint~"+p.IP.String()+"~"+p.Name+".default~default.svc.cluster.local") {
		t.Errorf("node id: got %q", got)
	}
	if model.DataplaneMode(m, p) != model.DataplaneNone {
		t.Errorf("a waypoint pod is in no data-plane mode: got %v", model.DataplaneMode(m, p))
	}
	if len(m.GatewaysFor(p)) != 0 || len(m.Istio.Gateways) != 0 {
		t.Errorf("a waypoint makes no Istio Gateway: %d", len(m.Istio.Gateways))
	}
}

func TestWaypointAttachment(t *testing.T) {
	m := buildWaypoints(t, waypointScenario)
	svc := func(name string) *model.Service {
		for _, s := range m.Services {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no Service %s", name)
		return nil
	}
	if b := m.WaypointOfService("default", svc("reviews").Labels, nil); b.Waypoint == nil || b.Waypoint.Name != "waypoint" {
		t.Errorf("reviews inherits default's waypoint: got %+v", b)
	}
	if b := m.WaypointOfService("default", svc("ratings").Labels, nil); b.Waypoint != nil || b.Problem != "" {
		t.Errorf("ratings opts out: got %+v", b)
	}
	wp := m.Waypoints[1]
	if b := m.WaypointOfService("default", svc("waypoint").Labels, nil); b.Waypoint != nil {
		t.Errorf("a waypoint's own Service has no waypoint: got %+v", b)
	}
	if b := m.WaypointOfService("default", nil, func(*model.Waypoint) bool { return false }); b.Waypoint != nil || !strings.Contains(b.Problem, "not ready") {
		t.Errorf("a waypoint not ready: got %+v", b)
	}
	reviews := m.Pod("reviews")
	if b := m.WaypointOfWorkload(reviews, nil); b.Waypoint == nil || b.Waypoint.ResourceName() != "apps/wl" {
		t.Errorf("pod reviews names apps/wl: got %+v", b)
	}
	// The namespace's waypoint takes service traffic only: a pod that inherits it has none.
	if b := m.WaypointOfWorkload(&model.Pod{Namespace: "default"}, nil); b.Waypoint != nil || b.Problem != "" {
		t.Errorf("inherited service waypoint: got %+v", b)
	}
	// Naming it on the pod itself is a problem.
	if b := m.WaypointOfWorkload(&model.Pod{Namespace: "default", Labels: map[string]string{"istio.io/use-waypoint": "waypoint"}}, nil); b.Waypoint != nil || !strings.Contains(b.Problem, "does not take workload traffic") {
		t.Errorf("pod naming a service waypoint: got %+v", b)
	}
	if b := m.WaypointOfWorkload(m.WaypointPods(wp)[0], nil); b.Waypoint != nil {
		t.Errorf("a waypoint's pod has no waypoint: got %+v", b)
	}
	// Same-namespace attachment only, by default.
	if b := m.WaypointOfService("other", map[string]string{"istio.io/use-waypoint": "waypoint", "istio.io/use-waypoint-namespace": "default"}, nil); b.Waypoint != nil || !strings.Contains(b.Problem, "does not allow attachment from namespace other") {
		t.Errorf("cross-namespace: got %+v", b)
	}
}

func TestWaypointRefusals(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"http listener", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: w}
spec: {gatewayClassName: istio-waypoint, listeners: [{name: http, port: 80, protocol: HTTP}]}
`, `wp.yaml: Gateway.gateway.networking.k8s.io default/w: spec.listeners[0].protocol: "HTTP": meshlab's waypoint serves the HBONE listener only (protocol HBONE, port 15008)`},
		{"port", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: w}
spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15009, protocol: HBONE}]}
`, `spec.listeners[0].port: 15009: a waypoint's HBONE listener is on port 15008`},
		{"waypoint-for", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: w, labels: {istio.io/waypoint-for: services}}
spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE}]}
`, `metadata.labels.istio.io/waypoint-for: "services" is not a waypoint traffic type (all, none, service, workload)`},
		{"named none", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: none}
spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE}]}
`, `metadata.name: "none" is reserved`},
		{"use-waypoint value", `apiVersion: v1
kind: Namespace
metadata: {name: a, labels: {istio.io/use-waypoint: Way_Point}}
`, `Namespace default/a: metadata.labels.istio.io/use-waypoint: "Way_Point" is not a DNS-1123 label`},
		{"use-waypoint-namespace alone", `apiVersion: v1
kind: Service
metadata: {name: s, labels: {istio.io/use-waypoint-namespace: a}}
spec: {selector: {app: s}, ports: [{port: 80}]}
`, `Service default/s: metadata.labels.istio.io/use-waypoint-namespace: is only read with istio.io/use-waypoint`},
		{"class controller", `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: istio-waypoint}
spec: {controllerName: example.com/x}
`, `spec.controllerName: "example.com/x": the istio-waypoint GatewayClass is controlled by "istio.io/mesh-controller"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("wp.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestWaypointClassDefault(t *testing.T) {
	m := buildWaypoints(t, `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: istio-waypoint, labels: {istio.io/waypoint-for: all}}
spec: {controllerName: istio.io/mesh-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint}
spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE}]}
`)
	if got := m.Waypoints[0].For; got != "all" {
		t.Errorf("For from the GatewayClass: got %q, want all", got)
	}
}
