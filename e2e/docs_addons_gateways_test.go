package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// addonGatewayYAML is the observability/gateways page's configuration of one addon
// (Gateway, VirtualService and DestinationRule in istio-system), Option 1 (HTTPS with
// the telemetry-gw-cert credential) or Option 2 (HTTP), as the page writes it.
func addonGatewayYAML(name, portName string, port int, https bool) string {
	server := `  - port:
      number: 80
      name: http-` + portName + `
      protocol: HTTP
`
	if https {
		server = `  - port:
      number: 443
      name: https-` + portName + `
      protocol: HTTPS
    tls:
      mode: SIMPLE
      credentialName: telemetry-gw-cert
`
	}
	return `cat <<EOF | kubectl apply -f -
apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: ` + name + `-gateway
  namespace: istio-system
spec:
  selector:
    istio: ingressgateway
  servers:
` + server + `    hosts:
    - "` + name + `.${INGRESS_DOMAIN}"
---
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: ` + name + `-vs
  namespace: istio-system
spec:
  hosts:
  - "` + name + `.${INGRESS_DOMAIN}"
  gateways:
  - ` + name + `-gateway
  http:
  - route:
    - destination:
        host: ` + name + `
        port:
          number: ` + strconv.Itoa(port) + `
---
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: ` + name + `
  namespace: istio-system
spec:
  host: ` + name + `
  trafficPolicy:
    tls:
      mode: DISABLE
---
EOF`
}

// TestDocsTelemetryAddonsGatewaysTask walks "Remotely Accessing Telemetry Addons"
// (observability/gateways) on a default install with the addons applied (Prometheus,
// Grafana, Kiali, Jaeger's tracing service): INGRESS_DOMAIN
// from the ingress gateway's EXTERNAL-IP (nip.io, which the reader's curl --resolve
// stands in for: a lab has no DNS outside), Option 1's self-signed certificate and
// telemetry-gw-cert secret, the four addons' Gateway, VirtualService and DestinationRule,
// each addon answering over HTTPS through the gateway with the page's
// certificate; then Option 2's HTTP configuration over the same objects, each answering
// over HTTP; then the page's clean up (its `delete gateway` names the Gateway API's kind
// in a lab, whose Gateway API CRDs are built in).
func TestDocsTelemetryAddonsGatewaysTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	requireHostTool(t, "openssl")
	requirePrometheus(t)
	p := startPageLab(t)
	p.sh(`istioctl install -y`)
	installed := map[string]bool{}
	for _, addon := range []string{"prometheus", "grafana", "kiali", "jaeger"} {
		if out := p.sh(`kubectl apply -f samples/addons/` + addon + `.yaml`); !strings.Contains(out, "deployment.apps/"+addon+" created") {
			t.Fatalf("kubectl apply -f samples/addons/%s.yaml:\n%s", addon, out)
		}
		installed[addon] = true
	}
	installed["tracing"] = installed["jaeger"]
	host := strings.TrimSpace(p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
echo $INGRESS_HOST`))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`).MatchString(host) {
		t.Fatalf("INGRESS_HOST=%q, want the ingress gateway's EXTERNAL-IP", host)
	}
	domain := host + ".nip.io"
	env := "export INGRESS_DOMAIN=" + domain + "\n"
	p.step("INGRESS_DOMAIN=" + domain)

	certs := t.TempDir() // the page's /tmp/certs, one per test
	if out := p.sh(env + `CERT_DIR=` + certs + `
mkdir -p ${CERT_DIR}
openssl req -x509 -sha256 -nodes -days 365 -newkey rsa:2048 -subj "/O=example Inc./CN=*.${INGRESS_DOMAIN}" -keyout ${CERT_DIR}/ca.key -out ${CERT_DIR}/ca.crt
openssl req -out ${CERT_DIR}/cert.csr -newkey rsa:2048 -nodes -keyout ${CERT_DIR}/tls.key -subj "/CN=*.${INGRESS_DOMAIN}/O=example organization"
openssl x509 -req -days 365 -CA ${CERT_DIR}/ca.crt -CAkey ${CERT_DIR}/ca.key -set_serial 0 -in ${CERT_DIR}/cert.csr -out ${CERT_DIR}/tls.crt
kubectl create -n istio-system secret tls telemetry-gw-cert --key=${CERT_DIR}/tls.key --cert=${CERT_DIR}/tls.crt`); !strings.Contains(out, "secret/telemetry-gw-cert created") {
		t.Fatalf("the page's certificate and secret:\n%s", out)
	}
	p.step("telemetry-gw-cert made from the page's self-signed certificate")

	addons := []struct {
		name, portName string
		port           int
		path, want     string // a path of the addon's and what its answer holds
	}{
		{"grafana", "grafana", 3000, "/api/health", `"database"`},
		{"kiali", "kiali", 20001, "/kiali/api", `"Kiali state":"running"`},
		{"prometheus", "prom", 9090, "/api/v1/status/buildinfo", `"status":"success"`},
		{"tracing", "tracing", 80, "/jaeger/api/services", `"data"`},
	}
	for _, https := range []bool{true, false} {
		scheme, port := "https", "443"
		if !https {
			scheme, port = "http", "80"
		}
		for _, a := range addons {
			out := p.sh(env + addonGatewayYAML(a.name, a.portName, a.port, https))
			for _, kind := range []string{"gateway.networking.istio.io/" + a.name + "-gateway", "virtualservice.networking.istio.io/" + a.name + "-vs", "destinationrule.networking.istio.io/" + a.name} {
				// Option 2 over Option 1's objects: the Gateway changes, the rest is
				// unchanged, as kubectl apply says (the page shows "configured" for all).
				if !strings.Contains(out, kind+" created") && !strings.Contains(out, kind+" configured") && !strings.Contains(out, kind+" unchanged") {
					t.Errorf("%s's configuration (%s): %s", a.name, scheme, out)
				}
			}
		}
		for _, a := range addons {
			if !installed[a.name] {
				continue
			}
			fqdn := a.name + "." + domain
			var out string
			var code int
			for try := 0; try < 30; try++ {
				// HTTP/1.1: Grafana's Service port is named "service" (sniffed), and a
				// gateway sends a sniffed port's requests in the downstream's protocol:
				// curl's h2 over TLS would reach Grafana as h2c, which it does not speak.
				out, code = p.outside("curl", "-sS", "-k", "--http1.1", "--max-time", "5", "-o", "/dev/stdout", "-w", "\n%{http_code}",
					"--resolve", fqdn+":"+port+":"+host, scheme+"://"+fqdn+":"+port+a.path)
				if code == 0 && strings.HasSuffix(out, "\n200") && strings.Contains(out, a.want) {
					break
				}
				time.Sleep(time.Second)
			}
			if code != 0 || !strings.HasSuffix(out, "\n200") || !strings.Contains(out, a.want) {
				diag, _ := p.command(`kubectl -n istio-system get pods -o wide
kubectl -n istio-system get svc ` + a.name + ` -o yaml
istioctl proxy-config endpoints deploy/istio-ingressgateway -n istio-system`).CombinedOutput()
				t.Fatalf("%s://%s%s through the gateway: exit %d\n%.1500s\nwant 200 with %q\n%s", scheme, fqdn, a.path, code, out, a.want, diag)
			}
			if https {
				cert, _ := p.outside("bash", "-c", "echo | openssl s_client -connect "+host+":443 -servername "+fqdn+" 2>/dev/null | openssl x509 -noout -subject")
				if !strings.Contains(cert, "*."+domain) {
					t.Errorf("%s's certificate through the gateway: %q, want the page's *.%s", a.name, cert, domain)
				}
			}
		}
		p.step("the installed addons answer through the gateway over " + scheme)
	}
	// The page's clean up. A lab has the Gateway API's CRDs built in, and with them
	// installed kubectl resolves "gateway" to the Gateway API's kind: the page's first
	// line finds no such Gateways (as on a cluster with both), so the Istio Gateways are
	// deleted by their full name after it.
	out, _ := p.command(`kubectl -n istio-system delete gateway grafana-gateway kiali-gateway prometheus-gateway tracing-gateway`).CombinedOutput()
	if !strings.Contains(string(out), `gateways.gateway.networking.k8s.io "tracing-gateway" not found`) {
		t.Errorf("kubectl -n istio-system delete gateway ...: %s", out)
	}
	if out := p.sh(`kubectl -n istio-system delete gateways.networking.istio.io grafana-gateway kiali-gateway prometheus-gateway tracing-gateway
kubectl -n istio-system delete virtualservice grafana-vs kiali-vs prometheus-vs tracing-vs
kubectl -n istio-system delete destinationrule grafana kiali prometheus tracing`); !strings.Contains(out, `gateway.networking.istio.io "tracing-gateway" deleted`) ||
		!strings.Contains(out, `virtualservice.networking.istio.io "tracing-vs" deleted`) {
		t.Errorf("the page's clean up:\n%s", out)
	}
	p.step("cleaned up")
}
