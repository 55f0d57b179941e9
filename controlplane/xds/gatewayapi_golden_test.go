package xds

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// gatewayAPIScenario is the Gateway API form of Istio's ingress task, read by package
// config as a user writes it: httpbin, a Gateway of class istio in istio-ingress
// admitting routes from all namespaces, and an HTTPRoute for httpbin.example.com's
// /status and /delay, plus an exact /headers rule with a header match and filters.
const gatewayAPIScenario = `apiVersion: v1
kind: Service
metadata: {name: httpbin}
spec:
  selector: {app: httpbin}
  ports: [{name: http, port: 8000, targetPort: 80}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: httpbin}
spec:
  selector: {matchLabels: {app: httpbin}}
  template:
    metadata: {labels: {app: httpbin}}
    spec:
      serviceAccountName: httpbin
      containers: [{name: httpbin, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: httpbin-gateway, namespace: istio-ingress}
spec:
  gatewayClassName: istio
  listeners:
  - {name: default, hostname: "*.example.com", port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: http}
spec:
  parentRefs: [{name: httpbin-gateway, namespace: istio-ingress}]
  hostnames: ["httpbin.example.com"]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /status}
    - path: {type: PathPrefix, value: /delay}
    backendRefs: [{name: httpbin, port: 8000}]
  - matches:
    - path: {type: Exact, value: /headers}
      headers: [{name: x-test, value: "yes"}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-set, value: s}]}
    backendRefs: [{name: httpbin, port: 8000}]
`

// The automated deployment's router pod gets istiod's gateway config for the listener:
// 0.0.0.0_80 (the Service's port 80 targets 80) routed by http.80, a virtual host
// httpbin.example.com:80 (the listener's *.example.com intersected with the route's
// hostname) whose routes keep Gateway API precedence (the exact /headers first; each
// PathPrefix an exact path and a "/"-ended prefix), and
// httpbin's outbound cluster.
func TestGatewayAPIGolden(t *testing.T) {
	t.Parallel()
	s, err := config.Load("gateway-api.yaml", []byte(gatewayAPIScenario))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(m.Pods, func(p *model.Pod) bool { return p.Router })
	if i < 0 {
		t.Fatal("no router pod for the Gateway")
	}
	pod := m.Pods[i]
	res := generateGateway(t, m, pod.Name)
	testutil.Golden(t, "gatewayapi-http", dumpJSON(t, res))
	if got := names(res[resource.ListenerType]); !slices.Equal(got, []string{"0.0.0.0_80"}) {
		t.Errorf("listeners = %q; want [0.0.0.0_80]", got)
	}
	if got := names(res[resource.RouteType]); !slices.Equal(got, []string{"http.80"}) {
		t.Fatalf("routes = %q; want [http.80]", got)
	}
	vh := res[resource.RouteType][0].(*route.RouteConfiguration).GetVirtualHosts()
	if len(vh) != 1 || vh[0].GetName() != "httpbin.example.com:80" || len(vh[0].GetRoutes()) != 5 {
		t.Fatalf("virtual hosts = %v; want one httpbin.example.com:80 with 5 routes (/headers, /status and /status/, /delay and /delay/)", vh)
	}
	first := vh[0].GetRoutes()[0]
	if first.GetMatch().GetPath() != "/headers" || len(first.GetMatch().GetHeaders()) != 1 ||
		first.GetRoute().GetCluster() != "outbound|8000||httpbin.default.svc.cluster.local" {
		t.Errorf("first route = %v; want the exact /headers match with its header, to httpbin:8000", first)
	}
	// PathPrefix /status matches whole segments: /status itself and /status/..., not /statusx.
	if p, q := vh[0].GetRoutes()[1].GetMatch().GetPath(), vh[0].GetRoutes()[2].GetMatch().GetPrefix(); p != "/status" || q != "/status/" {
		t.Errorf("routes 2 and 3 match path %q and prefix %q; want /status and /status/", p, q)
	}
	// A sidecar never gets the gateway's routes.
	side := generateGateway(t, m, m.Pods[slices.IndexFunc(m.Pods, func(p *model.Pod) bool { return !p.Router })].Name)
	for _, r := range side[resource.RouteType] {
		for _, v := range r.(*route.RouteConfiguration).GetVirtualHosts() {
			if strings.Contains(v.GetName(), "example.com") {
				t.Errorf("a sidecar got the gateway's virtual host %s", v.GetName())
			}
		}
	}
}

// Filters and weights of an HTTPRoute reach the gateway's routes: a RequestRedirect
// answers 301 to new.example.com/status/200, URLRewrite rewrites prefix and authority,
// backend weights 3:1 become weighted clusters 75/25.
func TestGatewayAPIFilters(t *testing.T) {
	t.Parallel()
	scenario := strings.Replace(gatewayAPIScenario, `  - matches:
    - path: {type: Exact, value: /headers}`, `  - matches:
    - path: {type: PathPrefix, value: /old}
    filters:
    - type: RequestRedirect
      requestRedirect: {hostname: new.example.com, path: {type: ReplaceFullPath, replaceFullPath: /status/200}, statusCode: 301}
  - matches:
    - path: {type: PathPrefix, value: /get}
    filters:
    - type: URLRewrite
      urlRewrite: {hostname: rewritten.example.com, path: {type: ReplacePrefixMatch, replacePrefixMatch: /anything}}
    backendRefs: [{name: httpbin, port: 8000, weight: 3}, {name: httpbin-v2, port: 8000, weight: 1}]
  - matches:
    - path: {type: Exact, value: /headers}`, 1) + `---
apiVersion: v1
kind: Service
metadata: {name: httpbin-v2}
spec:
  selector: {app: httpbin}
  ports: [{name: http, port: 8000, targetPort: 80}]
`
	s, err := config.Load("gateway-api.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	pod := m.Pods[slices.IndexFunc(m.Pods, func(p *model.Pod) bool { return p.Router })]
	res := generateGateway(t, m, pod.Name)
	routes := res[resource.RouteType][0].(*route.RouteConfiguration).GetVirtualHosts()[0].GetRoutes()
	byPrefix := map[string]*route.Route{}
	for _, r := range routes {
		byPrefix[r.GetMatch().GetPrefix()] = r
	}
	if rd := byPrefix["/old/"].GetRedirect(); rd.GetHostRedirect() != "new.example.com" || rd.GetPathRedirect() != "/status/200" ||
		rd.GetResponseCode() != route.RedirectAction_MOVED_PERMANENTLY {
		t.Errorf("/old redirect = %v; want 301 to new.example.com/status/200", rd)
	}
	ra := byPrefix["/get/"].GetRoute()
	if ra.GetPrefixRewrite() != "/anything" || ra.GetHostRewriteLiteral() != "rewritten.example.com" {
		t.Errorf("/get rewrite = %v; want prefix /anything, host rewritten.example.com", ra)
	}
	wc := ra.GetWeightedClusters().GetClusters()
	if len(wc) != 2 || wc[0].GetWeight().GetValue() != 75 || wc[1].GetWeight().GetValue() != 25 ||
		wc[1].GetName() != "outbound|8000||httpbin-v2.default.svc.cluster.local" {
		t.Errorf("/get weighted clusters = %v; want httpbin 75, httpbin-v2 25", wc)
	}
}

// The Secure Gateways task's Gateway API form: an HTTPS listener terminating TLS with
// the Secret httpbin-credential of the Gateway's namespace. The automated deployment's
// router pod gets istiod's HTTPS server: 0.0.0.0_443 with a chain matched on the
// listener's hostname, its certificate over ADS as kubernetes://httpbin-credential (the
// Secret sent with it), and its own route configuration with httpbin.example.com:443.
func TestGatewayAPIHTTPS(t *testing.T) {
	t.Parallel()
	scenario := strings.SplitN(gatewayAPIScenario, "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway", 2)[0] + `---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: mygateway, namespace: istio-system}
spec:
  gatewayClassName: istio
  listeners:
  - name: https
    hostname: httpbin.example.com
    port: 443
    protocol: HTTPS
    tls: {mode: Terminate, certificateRefs: [{name: httpbin-credential}]}
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {kubernetes.io/metadata.name: default}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httpbin}
spec:
  parentRefs: [{name: mygateway, namespace: istio-system}]
  hostnames: ["httpbin.example.com"]
  rules:
  - matches: [{path: {type: PathPrefix, value: /status}}]
    backendRefs: [{name: httpbin, port: 8000}]
`
	s, err := config.Load("secure-gateway-api.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	m.Secrets = append(m.Secrets,
		&model.Secret{Name: "httpbin-credential", Namespace: "istio-system", Cert: []byte("CERT"), Key: []byte("KEY")},
		&model.Secret{Name: "httpbin-credential", Namespace: "default", Cert: []byte("WRONG"), Key: []byte("WRONG")})
	i := slices.IndexFunc(m.Pods, func(p *model.Pod) bool { return p.Router })
	if i < 0 || m.Pods[i].Namespace != "istio-system" {
		t.Fatal("no router pod for the Gateway in istio-system")
	}
	res := generateGateway(t, m, m.Pods[i].Name)
	testutil.Golden(t, "gatewayapi-https", dumpJSON(t, res))
	if got := names(res[resource.ListenerType]); !slices.Equal(got, []string{"0.0.0.0_443"}) {
		t.Fatalf("listeners = %q; want [0.0.0.0_443]", got)
	}
	fc := res[resource.ListenerType][0].(*listener.Listener).GetFilterChains()
	if len(fc) != 1 || !slices.Equal(fc[0].GetFilterChainMatch().GetServerNames(), []string{"httpbin.example.com"}) {
		t.Fatalf("chains %v; want one matched on httpbin.example.com", fc)
	}
	var ctx tlsv3.DownstreamTlsContext
	if err := fc[0].GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx); err != nil {
		t.Fatal(err)
	}
	if c := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(c) != 1 || c[0].GetName() != "kubernetes://httpbin-credential" {
		t.Errorf("certificate %v; want kubernetes://httpbin-credential", c)
	}
	secrets := res[resource.SecretType]
	if len(secrets) != 1 || string(secrets[0].(*tlsv3.Secret).GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != "CERT" {
		t.Errorf("secrets %v; want istio-system's httpbin-credential", secrets)
	}
	rc := res[resource.RouteType]
	if len(rc) != 1 || len(rc[0].(*route.RouteConfiguration).GetVirtualHosts()) != 1 ||
		rc[0].(*route.RouteConfiguration).GetVirtualHosts()[0].GetName() != "httpbin.example.com:443" {
		t.Errorf("routes %v; want one configuration with virtual host httpbin.example.com:443", names(rc))
	}
}
