package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// echoServices are two versions of a gRPC Service beside httpbin, for GRPCRoute and
// TCPRoute backends.
const echoServices = `apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{name: grpc, port: 7070}, {name: tcp, port: 9000}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-v1}
spec:
  selector: {app: echo, version: v1}
  ports: [{name: grpc, port: 7070}, {name: tcp, port: 9000}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-v2}
spec:
  selector: {app: echo, version: v2}
  ports: [{name: grpc, port: 7070}, {name: tcp, port: 9000}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo-v1}
spec:
  selector: {matchLabels: {app: echo, version: v1}}
  template:
    metadata: {labels: {app: echo, version: v1}}
    spec: {containers: [{name: app, image: gcr.io/istio-testing/app, ports: [{containerPort: 7070}, {containerPort: 9000}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo-v2}
spec:
  selector: {matchLabels: {app: echo, version: v2}}
  template:
    metadata: {labels: {app: echo, version: v2}}
    spec: {containers: [{name: app, image: gcr.io/istio-testing/app, ports: [{containerPort: 7070}, {containerPort: 9000}]}]}
`

func vsNamed(t *testing.T, m *model.Model, name string) *model.IstioConfig[*networking.VirtualService] {
	t.Helper()
	for _, vs := range m.Istio.VirtualServices {
		if vs.Name == name {
			return vs
		}
	}
	var names []string
	for _, vs := range m.Istio.VirtualServices {
		names = append(names, vs.Namespace+"/"+vs.Name)
	}
	t.Fatalf("no VirtualService %s among %v", name, names)
	return nil
}

// TestGRPCRouteMesh converts a GRPCRoute whose parent is a Service (GAMMA) as istiod:
// one mesh VirtualService of the Service's hostname, a route per match with the method
// as a path match and the parent's port in each, sorted exact, prefix, regex, then the
// rule without matches; weights as written, a lone backend without one.
func TestGRPCRouteMesh(t *testing.T) {
	m := buildGatewayAPI(t, docs(echoServices, `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, port: 7070}]
  rules:
  - backendRefs: [{name: echo-v1, port: 7070, weight: 80}, {name: echo-v2, port: 7070, weight: 20}]
  - matches:
    - method: {type: RegularExpression, service: "grpc\\.health\\..*"}
    - method: {method: Watch}
    backendRefs: [{name: echo-v2, port: 7070}]
  - matches:
    - method: {service: grpc.health.v1.Health}
      headers: [{name: x-version, value: v2}]
    - method: {service: grpc.health.v1.Health, method: Check}
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-routed, value: check}]}
    backendRefs:
    - name: echo-v2
      port: 7070
      filters:
      - type: ResponseHeaderModifier
        responseHeaderModifier: {add: [{name: x-backend, value: v2}]}
`))
	vs := vsNamed(t, m, model.MeshRouteName("default", 7070, "echo.default.svc.cluster.local"))
	if !slices.Equal(vs.Spec.GetHosts(), []string{"echo.default.svc.cluster.local"}) || !slices.Equal(vs.Spec.GetGateways(), []string{model.MeshGateway}) {
		t.Fatalf("hosts %v gateways %v", vs.Spec.GetHosts(), vs.Spec.GetGateways())
	}
	var got []string
	for _, r := range vs.Spec.GetHttp() {
		var ms []string
		for _, mt := range r.GetMatch() {
			if mt.GetPort() != 7070 {
				t.Errorf("route %s match %v: want port 7070", r.GetName(), mt)
			}
			ms = append(ms, strings.ReplaceAll(mt.GetUri().String(), " ", "")+strings.TrimSpace(" "+headerKeys(mt.GetHeaders())))
		}
		got = append(got, r.GetName()+"="+strings.Join(ms, ","))
	}
	want := []string{
		`default.echo.2=exact:"/grpc.health.v1.Health/Check"`,
		`default.echo.2=prefix:"/grpc.health.v1.Health/"x-version`,
		`default.echo.1=regex:"/grpc\\.health\\..*/.+"`,
		`default.echo.1=regex:"/[^/]+/Watch"`,
		`default.echo.0=<nil>`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("routes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	split := vs.Spec.GetHttp()[4]
	if r := split.GetRoute(); len(r) != 2 || r[0].GetWeight() != 80 || r[1].GetWeight() != 20 || r[1].GetDestination().GetHost() != "echo-v2.default.svc.cluster.local" {
		t.Errorf("split %v: want echo-v1 80, echo-v2 20", r)
	}
	check := vs.Spec.GetHttp()[0]
	if check.GetHeaders().GetRequest().GetSet()["x-routed"] != "check" || len(check.GetRoute()) != 1 || check.GetRoute()[0].GetWeight() != 0 ||
		check.GetRoute()[0].GetHeaders().GetResponse().GetAdd()["x-backend"] != "v2" {
		t.Errorf("check route %v", check)
	}
}

func headerKeys(h map[string]*networking.StringMatch) string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestGRPCRouteGateway binds a GRPCRoute to an HTTP listener of a Gateway and keeps it
// from a TCP one.
func TestGRPCRouteGateway(t *testing.T) {
	m := buildGatewayAPI(t, docs(echoServices, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec:
  gatewayClassName: istio
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: tcp, port: 9000, protocol: TCP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo}
spec:
  parentRefs: [{name: g}]
  hostnames: [echo.example.com]
  rules:
  - backendRefs: [{name: echo, port: 7070}]
`))
	vs := vsNamed(t, m, "echo-grpc"+model.GatewayAPIInfix)
	if !slices.Equal(vs.Spec.GetGateways(), []string{"default/g" + model.GatewayAPIInfix + "-http"}) || !slices.Equal(vs.Spec.GetHosts(), []string{"echo.example.com"}) {
		t.Errorf("gateways %v hosts %v: want the http listener's only, echo.example.com", vs.Spec.GetGateways(), vs.Spec.GetHosts())
	}
	if h := vs.Spec.GetHttp(); len(h) != 1 || len(h[0].GetMatch()) != 0 || h[0].GetRoute()[0].GetDestination().GetHost() != "echo.default.svc.cluster.local" {
		t.Errorf("routes %v", h)
	}
}

// TestTCPRoute converts Istio's TCP traffic shifting task in its Gateway API form (a
// TCP listener, a TCPRoute 80/20 over two Services) and a TCPRoute on a Service parent.
func TestTCPRoute(t *testing.T) {
	m := buildGatewayAPI(t, docs(echoServices, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tcp-echo-gateway}
spec:
  gatewayClassName: istio
  listeners:
  - name: tcp-31400
    protocol: TCP
    port: 31400
    allowedRoutes:
      kinds:
      - kind: TCPRoute
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: tcp-echo}
spec:
  parentRefs:
  - name: tcp-echo-gateway
    sectionName: tcp-31400
  rules:
  - backendRefs:
    - name: echo-v1
      port: 9000
      weight: 80
    - name: echo-v2
      port: 9000
      weight: 20
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: mesh}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, port: 9000}]
  rules:
  - backendRefs: [{name: echo-v2, port: 9000}]
`))
	gw := vsNamed(t, m, "tcp-echo-tcp"+model.GatewayAPIInfix)
	if !slices.Equal(gw.Spec.GetGateways(), []string{"default/tcp-echo-gateway" + model.GatewayAPIInfix + "-tcp-31400"}) || !slices.Equal(gw.Spec.GetHosts(), []string{"*"}) {
		t.Errorf("gateways %v hosts %v", gw.Spec.GetGateways(), gw.Spec.GetHosts())
	}
	if tr := gw.Spec.GetTcp(); len(tr) != 1 || len(tr[0].GetRoute()) != 2 || tr[0].GetRoute()[0].GetWeight() != 80 || tr[0].GetRoute()[1].GetWeight() != 20 ||
		tr[0].GetRoute()[0].GetDestination().GetHost() != "echo-v1.default.svc.cluster.local" || tr[0].GetRoute()[0].GetDestination().GetPort().GetNumber() != 9000 {
		t.Errorf("tcp routes %v: want echo-v1:9000 80, echo-v2:9000 20", tr)
	}
	var server bool
	for _, g := range m.Istio.Gateways {
		for _, s := range g.Spec.GetServers() {
			if s.GetPort().GetNumber() == 31400 {
				server = s.GetPort().GetProtocol() == "TCP"
			}
		}
	}
	if !server {
		t.Errorf("no TCP server on 31400 among the Istio Gateways")
	}
	mesh := vsNamed(t, m, model.MeshRouteName("default", 9000, "echo.default.svc.cluster.local"))
	if tr := mesh.Spec.GetTcp(); len(tr) != 1 || len(tr[0].GetMatch()) != 1 || tr[0].GetMatch()[0].GetPort() != 9000 ||
		len(tr[0].GetRoute()) != 1 || tr[0].GetRoute()[0].GetWeight() != 0 {
		t.Errorf("mesh tcp routes %v: want one on port 9000 to echo-v2 without weight", tr)
	}
}

func TestGatewayAPIRouteRefusals(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"grpc backend mirror", `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules: [{backendRefs: [{name: echo, port: 7070, filters: [{type: RequestMirror, requestMirror: {backendRef: {name: echo-v2, port: 7070}}}]}]}]
`, `spec.rules[0].backendRefs[0].filters[0].requestMirror: is not supported by meshlab's GRPCRoute`},
		{"grpc mirror percent and fraction", `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: echo-v2, port: 7070}, percent: 10, fraction: {numerator: 1}}}], backendRefs: [{name: echo, port: 7070}]}]
`, `spec.rules[0].filters[0].requestMirror: only one of percent or fraction may be specified`},
		{"grpc mirror without port", `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: echo-v2}}}], backendRefs: [{name: echo, port: 7070}]}]
`, `spec.rules[0].filters[0].requestMirror.backendRef.port: is required for a Service backend`},
		{"grpc empty method", `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules: [{matches: [{method: {type: Exact}}], backendRefs: [{name: echo, port: 7070}]}]
`, `spec.rules[0].matches[0].method: names neither service nor method`},
		{"tcp zero weights", `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules: [{backendRefs: [{name: echo, port: 9000, weight: 0}]}]
`, `spec.rules[0].backendRefs: every weight is 0`},
		{"tcp listener hostname", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec: {gatewayClassName: istio, listeners: [{name: tcp, port: 9000, protocol: TCP, hostname: a.example.com}]}
`, `spec.listeners[0].hostname: is not read on a TCP listener`},
		{"tcp listener http kind", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec: {gatewayClassName: istio, listeners: [{name: tcp, port: 9000, protocol: TCP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}]}
`, `spec.listeners[0].allowedRoutes.kinds[0]: HTTPRoute is not a route kind a TCP listener serves (TCPRoute)`},
		{"grpc version", `apiVersion: gateway.networking.k8s.io/v1beta1
kind: GRPCRoute
metadata: {name: r}
`, `version v1beta1 of GRPCRoute is not one meshlab reads (v1, v1alpha2)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("gw.yaml", []byte(docs(httpbinManifest, echoServices, tc.yaml)))
			var el ErrorList
			if !errors.As(err, &el) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestRouteStatusKinds: a TCPRoute whose Gateway's only listener serves HTTP is not
// accepted there (NotAllowedByListeners), as istiod reports it.
func TestRouteStatusKinds(t *testing.T) {
	s, err := Load("gw.yaml", []byte(docs(httpbinManifest, echoServices, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec: {gatewayClassName: istio, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: g}]
  rules: [{backendRefs: [{name: echo, port: 9000}]}]
`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range s.Objects {
		if o.TCPRoute == nil {
			continue
		}
		st := RouteStatus(s.Objects, o)
		if len(st.Parents) != 1 || st.Parents[0].Conditions[0].Reason != "NotAllowedByListeners" {
			t.Errorf("status %+v: want NotAllowedByListeners", st)
		}
		return
	}
	t.Fatal("no TCPRoute loaded")
}

// TestRouteMirror converts a GRPCRoute's and an HTTPRoute's RequestMirror filters as
// istiod's createMirrorFilter into the golden Istio config: the rule's routes carry
// mirrors (the backend's Service and port; 100*numerator/denominator for a fraction, the
// percent as written, none for every request), in filter order.
func TestRouteMirror(t *testing.T) {
	t.Parallel()
	s, err := Load("mirror.yaml", []byte(docs(httpbinManifest, echoServices, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httpbin}
spec:
  parentRefs: [{group: "", kind: Service, name: httpbin, port: 8000}]
  rules:
  - filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: echo-v2, port: 7070}, fraction: {numerator: 1}}
    backendRefs: [{name: httpbin, port: 8000}]
`, `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, port: 7070}]
  rules:
  - matches: [{method: {service: grpc.health.v1.Health}}]
    filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: echo-v2, port: 7070}, fraction: {numerator: 1, denominator: 3}}
    - type: RequestMirror
      requestMirror: {backendRef: {name: echo-v1, port: 7070}, percent: 25}
    backendRefs: [{name: echo-v1, port: 7070}]
  - filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: echo-v2, port: 7070}}
    backendRefs: [{name: echo-v1, port: 7070}]
`)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	testutil.Golden(t, "route-mirror", []byte(renderDerived(t, gatewayAPIIstio(s.Objects))))
}
