package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsSecureMetricsTask walks "Securing Prometheus Scraping for Istio Sidecar and
// Gateway" (tasks/observability/metrics/secure-metrics) as Istio's test of the page does,
// on the default profile: samples/addons/extras/prometheus-secure-metrics.yaml in
// istio-system (its sidecar writes the workload certificate to the istio-certs emptyDir
// it shares with prometheus-server, OUTPUT_CERTS, through the array form of
// userVolumeMount), httpbin, the page's patch giving httpbin's proxy the mTLS metrics
// listeners 15091 and 15092 (proxy-config listeners printing the page's three lines),
// its curl from Prometheus' istio-proxy with those certificates over mTLS to httpbin's
// 15092 (200), and its plain-text curl to 15091 from httpbin's own istio-proxy (the
// page's "connection termination"); the lab's Prometheus scrapes httpbin over mTLS (the
// sample's istio-secure-merged-metrics job, found by the prometheus.istio.io/secure-port
// annotation the injector sets); the hardened patch (METRICS_LOCALHOST_ACCESS_ONLY) puts
// 15090 on 127.0.0.1 while 15092 still answers; then the page's clean up.
func TestDocsSecureMetricsTask(t *testing.T) {
	testutil.RequireRoot(t)
	requirePrometheus(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh("istioctl install --set profile=default -y")
	p.sh(`kubectl apply -n istio-system -f samples/addons/extras/prometheus-secure-metrics.yaml
kubectl rollout status deployment/prometheus -n istio-system`)
	// The page shows 3/3: the config reloader, prometheus-server and istio-proxy.
	// meshlab runs prometheus-server and the sidecar, and accepts the reloader as a
	// helper it does not run, so READY counts two.
	pods := p.until("the Prometheus pod running with its sidecar", func() string {
		return p.output(`kubectl get pod -n istio-system -l app.kubernetes.io/name=prometheus`)
	}, func(out string) bool {
		return regexp.MustCompile(`^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\nprometheus-[0-9a-f]+-[0-9a-z]{5}\s+2/2\s+Running\s+0\s+\S+\n$`).MatchString(out)
	})
	p.step("prometheus-secure-metrics.yaml applied:\n" + pods)

	p.sh(`kubectl label namespace default istio-injection=enabled --overwrite
kubectl apply -f samples/httpbin/httpbin.yaml`)
	dir := t.TempDir()
	patch := func(file, yaml string) string {
		return "cat <<EOF > " + dir + "/" + file + "\n" + yaml + "EOF\n"
	}
	p.sh(patch("httpbin-secure-metrics-patch.yaml", `spec:
  template:
    metadata:
      annotations:
        proxy.istio.io/config: |
          proxyMetadata:
            ENVOY_SECURE_METRICS_PORT: "15091"
            ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
        prometheus.io/path: "/stats/prometheus"
`) + "kubectl patch deployment httpbin -n default --type=merge --patch-file=" + dir + "/httpbin-secure-metrics-patch.yaml\nkubectl rollout status deployment/httpbin -n default")
	const vars = `export HTTPBIN_POD=$(kubectl get pod -n default -l app=httpbin -o jsonpath='{.items[0].metadata.name}')
export HTTPBIN_IP=$(kubectl get pod -n default -l app=httpbin -o jsonpath='{.items[0].status.podIP}')
export PROM_POD=$(kubectl get pod -n istio-system -l app.kubernetes.io/name=prometheus -o jsonpath='{.items[0].metadata.name}')
`
	listeners := regexp.MustCompile(`^0\.0\.0\.0\s+15090 ALL\s+Inline Route: /stats/prometheus\*\n` +
		`0\.0\.0\.0\s+15091 Trans: tls\s+Inline Route: /stats/prometheus\*\n` +
		`0\.0\.0\.0\s+15092 Trans: tls\s+Inline Route: /stats/prometheus\*, /metrics\*\n$`)
	out := p.until("httpbin's listeners 15090, 15091 and 15092 as the page prints them", func() string {
		return p.output(vars + `istioctl proxy-config listeners "$HTTPBIN_POD" -n default | grep -E "15090|15091|15092"`)
	}, listeners.MatchString)
	p.step("httpbin patched:\n" + out)

	const mtlsCurl = `kubectl exec -n istio-system "$PROM_POD" -c istio-proxy -- \
    curl -s -o /dev/null -w "%{http_code}" --max-time 5 \
    --cacert /etc/istio-certs/root-cert.pem \
    --cert /etc/istio-certs/cert-chain.pem \
    --key /etc/istio-certs/key.pem \
    --insecure \
    https://"$HTTPBIN_IP":15092/stats/prometheus`
	p.until("Prometheus' istio-proxy scrapes httpbin's 15092 over mTLS: 200", func() string { return p.output(vars + mtlsCurl) },
		func(out string) bool { return out == "200" })
	p.until("plain text to 15091 from httpbin's istio-proxy: the page's connection termination", func() string {
		return p.output(vars + `kubectl exec -n default "$HTTPBIN_POD" -c istio-proxy -- curl -s --max-time 3 http://"$HTTPBIN_IP":15091/stats/prometheus`)
	}, func(out string) bool {
		return out == "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
	})
	// Without a client certificate the listener refuses the handshake (curl 56, as
	// Envoy's require_client_certificate makes it).
	if out := p.output(vars + `kubectl exec -n istio-system "$PROM_POD" -c istio-proxy -- curl -s -o /dev/null -w "%{http_code}" --max-time 5 --insecure https://"$HTTPBIN_IP":15092/stats/prometheus`); strings.HasPrefix(out, "200") {
		t.Errorf("15092 answered a client without a certificate: %q", out)
	}
	p.step("mTLS scrape 200, plain text refused")

	// The lab's Prometheus runs the sample's istio-secure-merged-metrics job: it finds
	// httpbin by the prometheus.istio.io/secure-port annotation and scrapes it with the
	// certificates its sidecar wrote.
	p.until("Prometheus' istio-secure-merged-metrics target on httpbin's 15092 up", func() string {
		return p.output(vars + `kubectl exec -n istio-system "$PROM_POD" -c istio-proxy -- curl -s 'localhost:9090/api/v1/query?query=up%7Bjob%3D%22istio-secure-merged-metrics%22%7D'`)
	}, func(out string) bool {
		return strings.Contains(out, `"job":"istio-secure-merged-metrics"`) && strings.Contains(out, `:15092"`) && strings.Contains(out, `"1"]`)
	})
	p.step("Prometheus scrapes httpbin over mTLS")

	p.sh(patch("httpbin-hardened-patch.yaml", `spec:
  template:
    metadata:
      annotations:
        proxy.istio.io/config: |
          proxyMetadata:
            ENVOY_SECURE_METRICS_PORT: "15091"
            ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
            METRICS_LOCALHOST_ACCESS_ONLY: "true"
        prometheus.io/path: "/stats/prometheus"
`) + "kubectl patch deployment httpbin -n default --type=merge --patch-file=" + dir + "/httpbin-hardened-patch.yaml\nkubectl rollout status deployment/httpbin -n default")
	p.until("the hardened httpbin's 15090 on 127.0.0.1", func() string {
		return p.output(vars + `istioctl proxy-config listeners "$HTTPBIN_POD" -n default | grep -E "15090"`)
	}, regexp.MustCompile(`^127\.0\.0\.1\s+15090 ALL\s+Inline Route: /stats/prometheus\*\n$`).MatchString)
	p.until("the hardened httpbin still answers 15092 over mTLS", func() string { return p.output(vars + mtlsCurl) },
		func(out string) bool { return out == "200" })
	p.step("hardened: 15090 on the loopback, 15092 over mTLS")

	if out := p.sh(`kubectl delete -n istio-system -f samples/addons/extras/prometheus-secure-metrics.yaml
kubectl delete -f samples/httpbin/httpbin.yaml
kubectl label namespace default istio-injection-`); !strings.Contains(out, `deployment.apps "prometheus" deleted`) || !strings.Contains(out, `deployment.apps "httpbin" deleted`) || !strings.Contains(out, "namespace/default unlabeled") {
		t.Errorf("clean up:\n%s", out)
	}
}
