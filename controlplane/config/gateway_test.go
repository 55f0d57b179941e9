package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
)

// bookinfoGateway is the ingress task's Gateway and VirtualService as the docs write
// them (samples/bookinfo/networking/bookinfo-gateway.yaml's form).
const bookinfoGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: bookinfo-gateway
spec:
  selector:
    istio: ingressgateway
  servers:
  - port:
      number: 8080
      name: http
      protocol: HTTP
    hosts:
    - "*"
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: bookinfo
spec:
  hosts:
  - "*"
  gateways:
  - bookinfo-gateway
  http:
  - match:
    - uri:
        exact: /productpage
    - uri:
        prefix: /static
    route:
    - destination:
        host: productpage
        port:
          number: 9080
`

const productpageService = `apiVersion: v1
kind: Service
metadata: {name: productpage}
spec:
  selector: {app: productpage}
  ports: [{port: 9080, name: http}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: productpage-v1}
spec:
  labels: {app: productpage, version: v1}
  ports: [9080]
`

func buildModel(t *testing.T, yaml string) *model.Model {
	t.Helper()
	s, err := Load("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return m
}

// A Gateway selecting istio: ingressgateway brings istioctl's ingress gateway: its
// Service in istio-system (80->8080, 443->8443, 15021) and one router pod named as its
// Deployment's, with the labels the docs' Gateways select; the VirtualService bound to
// the Gateway only keeps its "*" host and does not apply to the mesh.
func TestGatewayBringsIngressGateway(t *testing.T) {
	t.Parallel()
	m := buildModel(t, docs(productpageService, bookinfoGateway))
	var svc *model.Service
	for _, s := range m.Services {
		if s.Namespace == "istio-system" && s.Name == "istio-ingressgateway" {
			svc = s
		}
	}
	if svc == nil {
		t.Fatalf("no istio-system/istio-ingressgateway Service among %d services", len(m.Services))
	}
	var ports []string
	for _, p := range svc.Ports {
		ports = append(ports, p.Name+":"+itoa(p.Port)+"->"+itoa(p.TargetPort))
	}
	if got := strings.Join(ports, " "); got != "status-port:15021->15021 http2:80->8080 https:443->8443 tcp:31400->31400 tls:15443->15443" {
		t.Errorf("ports = %s", got)
	}
	var gw *model.Pod
	for _, p := range m.Pods {
		if p.Router {
			if gw != nil {
				t.Fatalf("two router pods: %s and %s", gw.Name, p.Name)
			}
			gw = p
		}
	}
	if gw == nil {
		t.Fatal("no router pod")
	}
	if !strings.HasPrefix(gw.Name, "istio-ingressgateway-") || gw.Namespace != "istio-system" || !gw.Sidecar.Inject ||
		gw.Labels["istio"] != "ingressgateway" || gw.Labels["app"] != "istio-ingressgateway" ||
		gw.ServiceAccount != "istio-ingressgateway-service-account" || !strings.HasPrefix(gw.NodeID(), "router~"+gw.IP.String()+"~") {
		t.Errorf("gateway pod = %+v, node id %s", gw, gw.NodeID())
	}
	if !svc.Selects(gw.Labels) {
		t.Error("the gateway Service does not select the gateway pod")
	}
	if got := m.GatewaysFor(gw); len(got) != 1 || got[0].Name != "bookinfo-gateway" {
		t.Errorf("GatewaysFor = %v", got)
	}
	if len(m.Istio.VirtualServices) != 1 || model.AppliesToMesh(m.Istio.VirtualServices[0].Spec) ||
		!model.BindsGateway(m.Istio.VirtualServices[0].Spec, "default", "default", "bookinfo-gateway") {
		t.Errorf("VirtualService = %v", m.Istio.VirtualServices)
	}
	// The same scenario names the same pod (names are stable across builds).
	if again := buildModel(t, docs(productpageService, bookinfoGateway)); again.Pod(gw.Name) == nil {
		t.Errorf("a second build names the gateway pod differently")
	}
	// No Gateway, no gateway pod; an egress Gateway brings the egress gateway only.
	if m := buildModel(t, productpageService); len(m.Pods) != 1 {
		t.Errorf("pods without a Gateway: %d", len(m.Pods))
	}
	egress := strings.ReplaceAll(strings.SplitN(bookinfoGateway, "---", 2)[0], "ingressgateway", "egressgateway")
	m = buildModel(t, docs(productpageService, egress))
	if p := m.Pods[len(m.Pods)-1]; len(m.Pods) != 2 || !p.Router || p.Labels["istio"] != "egressgateway" {
		t.Errorf("pods with an egress Gateway: %+v", m.Pods)
	}
}

func itoa(n uint16) string { return big.NewInt(int64(n)).String() }

func TestGatewayLoadErrors(t *testing.T) {
	t.Parallel()
	gw := func(spec string) string {
		return "apiVersion: networking.istio.io/v1beta1\nkind: Gateway\nmetadata: {name: g}\nspec:\n" + spec
	}
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "selector missing or selecting nothing",
			yaml: docs(gw("  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\n"),
				strings.Replace(gw("  selector: {app: my-gw}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\n"), "name: g", "name: h", 1)),
			want: []string{
				`t.yaml: Gateway default/g: spec.selector: is required: meshlab's gateways are istio-system/istio-ingressgateway (istio=ingressgateway) and istio-system/istio-egressgateway (istio=egressgateway)`,
				`t.yaml: Gateway default/h: spec.selector: app=my-gw selects no gateway: meshlab makes istio-system/istio-ingressgateway (istio=ingressgateway) and istio-system/istio-egressgateway (istio=egressgateway), as istioctl's demo profile`,
			},
		},
		{
			name: "servers",
			yaml: gw(`  selector: {istio: ingressgateway}
  servers:
  - port: {number: 0, protocol: UDP}
    hosts: ["a/b/c", "*.*.com", "Upper.com", "bad_ns!/x.com"]
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [x.com]
  - port: {number: 443, name: https2, protocol: HTTPS}
    hosts: [y.com]
    tls: {mode: SIMPLE}
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [z.com]
    tls: {mode: PASSTHROUGH, credentialName: c, minProtocolVersion: TLSV1_2}
  - port: {number: 80, name: http2, protocol: HTTP}
    hosts: [z.com]
  - port: {number: 15443, name: tls, protocol: TLS}
    hosts: ["*"]
    tls: {mode: ISTIO_MUTUAL, credentialName: c}
  - port: {number: 15445, name: tls-auto, protocol: TLS}
    hosts: ["*"]
    tls: {mode: AUTO_PASSTHROUGH}
  - port: {number: 15444, name: https-pass, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: PASSTHROUGH}
`),
			want: []string{
				`spec.servers[3].tls.minProtocolVersion: is not supported by meshlab (Gateway supports in servers.tls: credentialName, mode)`,
				`spec.servers[0].port.number: 0 is out of range 1-65535`,
				`spec.servers[0].port.name: is required`,
				`spec.servers[0].port.protocol: "UDP" is not a protocol meshlab serves on a gateway (HTTP, HTTP2, GRPC, HTTPS, TCP, TLS)`,
				`spec.servers[0].hosts[0]: "a/b/c" is not a lowercase DNS name`,
				`spec.servers[0].hosts[1]: "*.*.com": a wildcard is only accepted as the whole host or its first label ("*" or "*.example.com")`,
				`spec.servers[0].hosts[2]: "Upper.com" is not a lowercase DNS name`,
				`spec.servers[0].hosts[3]: "bad_ns!/x.com": namespace "bad_ns!" is not a DNS-1123 label`,
				`spec.servers[1].tls: is required for a HTTPS server`,
				`spec.servers[2].tls.credentialName: is required for mode SIMPLE (the name of a Secret in istio-system)`,
				`spec.servers[3].tls: is only read on HTTPS and TLS servers (protocol is HTTP)`,
				`spec.servers[4].port.number: 80 is already the port of a HTTP server: only HTTPS and TLS servers may share a port`,
				`spec.servers[5].tls.credentialName: is not read with mode ISTIO_MUTUAL (the gateway presents its workload certificate)`,
				`spec.servers[6].tls.mode: AUTO_PASSTHROUGH is not supported by meshlab (SIMPLE, MUTUAL, ISTIO_MUTUAL, PASSTHROUGH)`,
			},
		},
		{
			name: "tls routes",
			yaml: docs(productpageService, vs(`  hosts: ["nginx.example.com", "*.shop.com"]
  gateways: [mygateway]
  tls:
  - match: [{sniHosts: [nginx.example.com, a.shop.com, other.org, "Bad.com"], port: 70000}]
    route: [{destination: {host: productpage, port: {number: 9080}}}]
  - match: [{port: 443}]
    route: [{destination: {host: nowhere}}]
  - route: [{destination: {host: productpage}, weight: -1}]
  - match: [{sniHosts: ["*.shop.com"], sourceLabels: {app: x}}]
    route: [{destination: {host: productpage}}]
`), strings.Replace(vs(`  hosts: [productpage]
  tls:
  - match: [{sniHosts: [productpage], sourceNamespace: qa, destinationSubnets: [10.0.0.0/8]}]
    route: [{destination: {host: productpage}}]
`), "name: backend", "name: meshvs", 1)),
			want: []string{
				`t.yaml: VirtualService default/backend: spec.tls[3].match[0].sourceLabels: is not supported by meshlab`,
				`t.yaml: VirtualService default/meshvs: spec.tls[0].match[0].sourceNamespace: is not supported by meshlab`,
				`t.yaml: VirtualService default/meshvs: spec.tls[0].match[0].destinationSubnets: is not supported by meshlab`,
				`t.yaml: VirtualService default/backend: spec.tls[0].match[0].sniHosts[2]: "other.org" is not covered by any of the VirtualService's hosts [nginx.example.com *.shop.com]`,
				`t.yaml: VirtualService default/backend: spec.tls[0].match[0].sniHosts[3]: "Bad.com" is not a lowercase DNS name`,
				`t.yaml: VirtualService default/backend: spec.tls[0].match[0].port: 70000 is out of range 1-65535`,
				`t.yaml: VirtualService default/backend: spec.tls[1].match[0].sniHosts: at least one SNI host is required`,
				`t.yaml: VirtualService default/backend: spec.tls[2].match: at least one match is required`,
				`t.yaml: VirtualService default/backend: spec.tls[2].route[0].weight: -1 must not be negative`,
			},
		},
		{
			name: "virtual service bound to gateways",
			yaml: docs(productpageService, vs(`  hosts: ["*.example.com", "*", "a.*.com"]
  gateways: [bookinfo-gateway, "istio-system/x", "Bad/x"]
  http: [{route: [{destination: {host: productpage}}]}]
`), strings.Replace(vs(`  hosts: ["*"]
  gateways: [mesh, g]
  http: [{route: [{destination: {host: productpage}}]}]
`), "name: backend", "name: meshvs", 1)),
			want: []string{
				`t.yaml: VirtualService default/backend: spec.gateways[2]: "Bad/x": namespace "Bad" is not a DNS-1123 label`,
				`t.yaml: VirtualService default/backend: spec.hosts[2]: "a.*.com": a wildcard is only accepted as the whole host or its first label ("*" or "*.example.com")`,
				`t.yaml: VirtualService default/meshvs: spec.hosts[0]: "*": wildcard hosts are not supported`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("t.yaml", []byte(tc.yaml))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load = %v, want an ErrorList", err)
			}
			got := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing error %q", w)
				}
			}
			if len(list) != len(tc.want) {
				t.Errorf("%d errors, want %d:\n%s", len(list), len(tc.want), got)
			}
		})
	}
}

// testCert returns a self-signed certificate and its key, PEM.
func testCert(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

// Secrets load as `kubectl create secret tls|generic` writes them (data in base64), and
// bad credentials are refused with the key that is wrong.
func TestGatewaySecrets(t *testing.T) {
	t.Parallel()
	cert, key := testCert(t, "httpbin.example.com")
	other, otherKey := testCert(t, "other")
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	secret := func(name, typ string, data map[string]string) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + ", namespace: istio-system}\n")
		if typ != "" {
			b.WriteString("type: " + typ + "\n")
		}
		b.WriteString("data:\n")
		for k, v := range data {
			b.WriteString("  " + k + ": " + v + "\n")
		}
		return b.String()
	}
	m := buildModel(t, docs(
		secret("httpbin-credential", "kubernetes.io/tls", map[string]string{"tls.crt": b64(cert), "tls.key": b64(key)}),
		secret("generic", "", map[string]string{"cert": b64(cert), "key": b64(key), "cacert": b64(other)}),
		secret("generic-cacert", "Opaque", map[string]string{"cacert": b64(other)}),
		secret("e", "", map[string]string{"example.com.crt": b64(other)}),
	))
	if s := m.Secret("istio-system", "e"); s == nil || s.Cert != nil || s.CACert != nil {
		t.Errorf("a generic Secret of other keys (volume data) = %+v, want it loaded, holding no credential", s)
	}
	if s := m.Secret("istio-system", "httpbin-credential"); s == nil || string(s.Cert) != string(cert) || string(s.Key) != string(key) || s.CACert != nil {
		t.Errorf("tls secret = %+v", s)
	}
	if s := m.Secret("istio-system", "generic"); s == nil || string(s.CACert) != string(other) {
		t.Errorf("generic secret = %+v", s)
	}
	if s := m.Secret("istio-system", "generic-cacert"); s == nil || s.Cert != nil || s.CACert == nil {
		t.Errorf("cacert secret = %+v", s)
	}
	_, err := Load("t.yaml", []byte(docs(
		secret("a", "kubernetes.io/tls", map[string]string{"tls.crt": b64(cert)}),
		secret("b", "kubernetes.io/tls", map[string]string{"tls.crt": b64(cert), "tls.key": b64(otherKey)}),
		secret("c", "kubernetes.io/dockerconfigjson", map[string]string{".dockerconfigjson": b64([]byte("{}"))}),
		secret("d", "", map[string]string{"cacert": b64([]byte("not pem"))}),
	)))
	for _, w := range []string{
		`t.yaml: Secret istio-system/a: data: a kubernetes.io/tls Secret needs tls.crt and tls.key`,
		`t.yaml: Secret istio-system/b: data.tls.crt: with tls.key: tls: private key does not match public key`,
		`t.yaml: Secret istio-system/c: type: "kubernetes.io/dockerconfigjson" is not read by meshlab`,
		`t.yaml: Secret istio-system/d: data.cacert: holds no PEM certificate`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing error %q in:\n%v", w, err)
		}
	}
}

// The "ingress gateway without TLS termination" task's Gateway (HTTPS, PASSTHROUGH,
// no credential) and VirtualService (a tls route by SNI) load; the tls route's
// destination is resolved to its service's FQDN, as http and tcp routes are.
func TestGatewayPassthroughLoads(t *testing.T) {
	t.Parallel()
	m := buildModel(t, docs(productpageService, `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: mygateway}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    tls: {mode: PASSTHROUGH}
    hosts: [nginx.example.com]
  - port: {number: 15443, name: tls, protocol: TLS}
    tls: {mode: PASSTHROUGH}
    hosts: ["*"]
`, vs(`  hosts: [nginx.example.com]
  gateways: [mygateway]
  tls:
  - match: [{port: 443, sniHosts: [nginx.example.com], gateways: [default/mygateway]}]
    route: [{destination: {host: productpage, port: {number: 9080}}, weight: 100}]
`)))
	if len(m.Istio.Gateways) != 1 || len(m.Istio.VirtualServices) != 1 {
		t.Fatalf("gateways %d, virtual services %d", len(m.Istio.Gateways), len(m.Istio.VirtualServices))
	}
	tr := m.Istio.VirtualServices[0].Spec.GetTls()
	if len(tr) != 1 || tr[0].GetRoute()[0].GetDestination().GetHost() != "productpage.default.svc.cluster.local" {
		t.Errorf("tls routes = %v", tr)
	}
}

// The HTTPS section of the "Egress Gateways" task loads as the task writes it: a TLS
// ServiceEntry, a PASSTHROUGH TLS server on the egress gateway, and a VirtualService
// bound to the mesh and the gateway whose tls routes send SNI edition.cnn.com from the
// sidecars to the gateway's cnn subset and from the gateway to the site.
func TestMeshTLSRoutesLoad(t *testing.T) {
	t.Parallel()
	m := buildModel(t, docs(productpageService, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cnn}
spec:
  hosts: [edition.cnn.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
`, `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: istio-egressgateway}
spec:
  selector: {istio: egressgateway}
  servers:
  - port: {number: 443, name: tls, protocol: TLS}
    hosts: [edition.cnn.com]
    tls: {mode: PASSTHROUGH}
`, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: egressgateway-for-cnn}
spec:
  host: istio-egressgateway.istio-system.svc.cluster.local
  subsets: [{name: cnn}]
`, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: direct-cnn-through-egress-gateway}
spec:
  hosts: [edition.cnn.com]
  gateways: [mesh, istio-egressgateway]
  tls:
  - match: [{gateways: [mesh], port: 443, sniHosts: [edition.cnn.com]}]
    route: [{destination: {host: istio-egressgateway.istio-system.svc.cluster.local, subset: cnn, port: {number: 443}}}]
  - match: [{gateways: [istio-egressgateway], port: 443, sniHosts: [edition.cnn.com]}]
    route: [{destination: {host: edition.cnn.com, port: {number: 443}}, weight: 100}]
`))
	if len(m.Istio.VirtualServices) != 1 || !model.AppliesToMesh(m.Istio.VirtualServices[0].Spec) {
		t.Fatalf("virtual services = %v, want the task's, bound to the mesh", m.Istio.VirtualServices)
	}
	if len(m.Istio.VirtualServices[0].Spec.GetTls()) != 2 {
		t.Errorf("tls routes = %v", m.Istio.VirtualServices[0].Spec.GetTls())
	}
	var https *model.ServicePort
	for _, s := range m.Services {
		if s.Name == model.EgressGatewayName {
			for i, p := range s.Ports {
				if p.Port == 443 {
					https = &s.Ports[i]
				}
			}
		}
	}
	if https == nil || https.Protocol != model.ProtocolHTTPS {
		t.Errorf("the egress gateway Service's port 443 = %+v, want protocol HTTPS", https)
	}
}
