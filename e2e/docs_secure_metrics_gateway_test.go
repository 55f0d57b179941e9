package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsSecureMetricsGateways walks the gateway sections of "Securing Prometheus
// Scraping for Istio Sidecar and Gateway" (tasks/observability/metrics/secure-metrics),
// which Istio's test of the page leaves out, on the default profile with the sample's
// secure Prometheus:
//   - "Enable on a gateway": the page's strategic patch of deployment
//     istio-ingressgateway (its pod template's annotations, istio-proxy's env) and
//     rollout status; the gateway prints the page's three proxy-config lines, answers
//     Prometheus' istio-proxy over mTLS on 15092, and the lab's Prometheus scrapes it.
//   - Gateway API: the page's merge patch of a Gateway istio-ingressgateway's
//     spec.infrastructure.annotations; its pod (gateway-name label) then prints the page's
//     three proxy-config lines, answers Prometheus' istio-proxy over mTLS on 15092, and
//     the lab's Prometheus scrapes it (istio-secure-merged-metrics, found by the
//     prometheus.istio.io/secure-port annotation the patch puts on its pod).
//   - The hardened install: `istioctl install -f ./istio-secure-metrics.yaml` as written
//     (meshConfig.defaultConfig.proxyMetadata, the ingress gateway's k8s.podAnnotations)
//     gives istioctl's ingress gateway 15091 and 15092, its 15090 on 127.0.0.1
//     (METRICS_LOCALHOST_ACCESS_ONLY), and Prometheus scrapes it over mTLS; httpbin,
//     applied after it, gets the same listeners from the mesh's proxyMetadata; then the
//     page's clean up.
func TestDocsSecureMetricsGateways(t *testing.T) {
	testutil.RequireRoot(t)
	requirePrometheus(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh("istioctl install --set profile=default -y")
	p.sh(`kubectl apply -n istio-system -f samples/addons/extras/prometheus-secure-metrics.yaml
kubectl rollout status deployment/prometheus -n istio-system`)
	dir := t.TempDir()
	file := func(name, yaml string) string {
		return "cat <<EOF > " + dir + "/" + name + "\n" + yaml + "EOF\n"
	}
	const prom = `export PROM_POD=$(kubectl get pod -n istio-system -l app.kubernetes.io/name=prometheus -o jsonpath='{.items[0].metadata.name}')
`
	mtlsCurl := func(ip string) string {
		return prom + `kubectl exec -n istio-system "$PROM_POD" -c istio-proxy -- \
    curl -s -o /dev/null -w "%{http_code}" --max-time 5 \
    --cacert /etc/istio-certs/root-cert.pem \
    --cert /etc/istio-certs/cert-chain.pem \
    --key /etc/istio-certs/key.pem \
    --insecure \
    https://"` + ip + `":15092/stats/prometheus`
	}
	scraped := func(what, ip string) {
		t.Helper()
		p.until("Prometheus' istio-secure-merged-metrics target on "+what+"'s 15092 up", func() string {
			return p.output(prom + `kubectl exec -n istio-system "$PROM_POD" -c istio-proxy -- curl -s 'localhost:9090/api/v1/query?query=up%7Bjob%3D%22istio-secure-merged-metrics%22%7D'`)
		}, func(out string) bool {
			return regexp.MustCompile(`"instance":"` + regexp.QuoteMeta(ip) + `:15092"[^]]*"1"\]`).MatchString(out)
		})
	}
	listeners := func(localhost bool) func(string) bool {
		addr := `0\.0\.0\.0`
		if localhost {
			addr = `127\.0\.0\.1`
		}
		return regexp.MustCompile(`^` + addr + `\s+15090 ALL\s+Inline Route: /stats/prometheus\*\n` +
			`0\.0\.0\.0\s+15091 Trans: tls\s+Inline Route: /stats/prometheus\*\n` +
			`0\.0\.0\.0\s+15092 Trans: tls\s+Inline Route: /stats/prometheus\*, /metrics\*\n$`).MatchString
	}

	// "Enable on a gateway": the page's strategic patch of istioctl's gateway Deployment.
	if out := p.sh(file("gateway-secure-metrics-patch.yaml", `spec:
  template:
    metadata:
      annotations:
        prometheus.istio.io/secure-port: "15092"
        prometheus.io/path: "/stats/prometheus"
    spec:
      containers:
      - name: istio-proxy
        env:
        - name: ENVOY_SECURE_METRICS_PORT
          value: "15091"
        - name: ENVOY_SECURE_MERGED_METRICS_PORT
          value: "15092"
`) + "kubectl patch deployment istio-ingressgateway -n istio-system --type=strategic --patch-file=" + dir + "/gateway-secure-metrics-patch.yaml\nkubectl rollout status deployment/istio-ingressgateway -n istio-system"); !strings.HasPrefix(out, "deployment.apps/istio-ingressgateway patched\n") {
		t.Fatalf("the page's gateway patch:\n%s\nwant kubectl's patched line", out)
	}
	const gw = `export GW_POD=$(kubectl get pod -n istio-system -l app=istio-ingressgateway -o jsonpath='{.items[0].metadata.name}')
`
	out := p.until("the patched ingress gateway's listeners 15090, 15091 and 15092 as the page prints them", func() string {
		return p.output(gw + `istioctl proxy-config listeners "$GW_POD" -n istio-system | grep -E "15090|15091|15092"`)
	}, listeners(false))
	p.step("ingress gateway patched:\n" + out)
	gwIP := strings.TrimSpace(p.output(`kubectl get pod -n istio-system -l app=istio-ingressgateway -o jsonpath='{.items[0].status.podIP}'`))
	p.until("Prometheus' istio-proxy scrapes the patched ingress gateway's 15092 over mTLS: 200", func() string { return p.output(mtlsCurl(gwIP)) },
		func(out string) bool { return out == "200" })
	scraped("the patched ingress gateway", gwIP)
	p.step("Prometheus scrapes the patched ingress gateway over mTLS")

	// Gateway API: the page patches a Gateway istio-ingressgateway in istio-system.
	p.sh(`cat <<EOF | kubectl apply -f -
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: istio-ingressgateway
  namespace: istio-system
spec:
  gatewayClassName: istio
  listeners:
  - name: http
    port: 80
    protocol: HTTP
EOF`)
	if out := p.sh(file("gateway-api-secure-metrics-patch.yaml", `spec:
  infrastructure:
    annotations:
      proxy.istio.io/config: |
        proxyMetadata:
          ENVOY_SECURE_METRICS_PORT: "15091"
          ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
      prometheus.istio.io/secure-port: "15092"
      prometheus.io/path: "/stats/prometheus"
`) + "kubectl patch gateway istio-ingressgateway -n istio-system --type=merge --patch-file=" + dir + "/gateway-api-secure-metrics-patch.yaml"); out != "gateway.gateway.networking.k8s.io/istio-ingressgateway patched\n" {
		t.Fatalf("the page's Gateway API patch:\n%s\nwant kubectl's patched line", out)
	}
	const apiGW = `export GW_POD=$(kubectl get pod -n istio-system -l gateway.networking.k8s.io/gateway-name=istio-ingressgateway -o jsonpath='{.items[0].metadata.name}')
`
	out = p.until("the Gateway API gateway's listeners 15090, 15091 and 15092 as the page prints them", func() string {
		return p.output(apiGW + `istioctl proxy-config listeners "$GW_POD" -n istio-system | grep -E "15090|15091|15092"`)
	}, listeners(false))
	p.step("Gateway API gateway patched:\n" + out)
	apiIP := strings.TrimSpace(p.output(`kubectl get pod -n istio-system -l gateway.networking.k8s.io/gateway-name=istio-ingressgateway -o jsonpath='{.items[0].status.podIP}'`))
	p.until("Prometheus' istio-proxy scrapes the Gateway API gateway's 15092 over mTLS: 200", func() string { return p.output(mtlsCurl(apiIP)) },
		func(out string) bool { return out == "200" })
	scraped("the Gateway API gateway", apiIP)
	p.step("Prometheus scrapes the Gateway API gateway over mTLS")

	// The hardened setup's install, as the page writes it.
	if out := p.sh(file("istio-secure-metrics.yaml", `apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    defaultConfig:
      proxyMetadata:
        ENVOY_SECURE_METRICS_PORT: "15091"
        ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
        METRICS_LOCALHOST_ACCESS_ONLY: "true"
  components:
    ingressGateways:
    - name: istio-ingressgateway
      enabled: true
      k8s:
        podAnnotations:
          prometheus.istio.io/secure-port: "15092"
          prometheus.io/path: "/stats/prometheus"
`) + "istioctl install -y -f " + dir + "/istio-secure-metrics.yaml"); !strings.Contains(out, "✔ Installation complete") {
		t.Fatalf("istioctl install -f istio-secure-metrics.yaml:\n%s", out)
	}
	out = p.until("istioctl's ingress gateway with 15091 and 15092, 15090 on 127.0.0.1", func() string {
		return p.output(gw + `istioctl proxy-config listeners "$GW_POD" -n istio-system | grep -E "15090|15091|15092"`)
	}, listeners(true))
	p.step("ingress gateway after the hardened install:\n" + out)
	gwIP = strings.TrimSpace(p.output(`kubectl get pod -n istio-system -l app=istio-ingressgateway -o jsonpath='{.items[0].status.podIP}'`))
	p.until("Prometheus' istio-proxy scrapes the ingress gateway's 15092 over mTLS: 200", func() string { return p.output(mtlsCurl(gwIP)) },
		func(out string) bool { return out == "200" })
	scraped("the ingress gateway", gwIP)
	p.step("Prometheus scrapes istioctl's ingress gateway over mTLS")

	// The install's defaultConfig.proxyMetadata is every proxy's: a sidecar made after it
	// (httpbin, no proxy.istio.io/config of its own) gets the listeners too.
	p.sh(`kubectl label namespace default istio-injection=enabled --overwrite
kubectl apply -f samples/httpbin/httpbin.yaml
kubectl rollout status deployment/httpbin -n default`)
	out = p.until("httpbin's sidecar with the mesh's 15091 and 15092, 15090 on 127.0.0.1", func() string {
		return p.output(`export HTTPBIN_POD=$(kubectl get pod -n default -l app=httpbin -o jsonpath='{.items[0].metadata.name}')
istioctl proxy-config listeners "$HTTPBIN_POD" -n default | grep -E "15090|15091|15092"`)
	}, listeners(true))
	p.step("httpbin after the hardened install:\n" + out)
	httpbinIP := strings.TrimSpace(p.output(`kubectl get pod -n default -l app=httpbin -o jsonpath='{.items[0].status.podIP}'`))
	p.until("Prometheus' istio-proxy scrapes httpbin's 15092 over mTLS: 200", func() string { return p.output(mtlsCurl(httpbinIP)) },
		func(out string) bool { return out == "200" })
	scraped("httpbin", httpbinIP)
	p.step("Prometheus scrapes httpbin with the mesh's proxyMetadata")

	if out := p.sh(`kubectl delete -n istio-system -f samples/addons/extras/prometheus-secure-metrics.yaml
kubectl delete -f samples/httpbin/httpbin.yaml
kubectl delete gateway istio-ingressgateway -n istio-system
kubectl label namespace default istio-injection-`); !strings.Contains(out, `deployment.apps "prometheus" deleted`) || !strings.Contains(out, `gateway.gateway.networking.k8s.io "istio-ingressgateway" deleted`) || !strings.Contains(out, "namespace/default unlabeled") {
		t.Errorf("clean up:\n%s", out)
	}
}
