package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istio.io's metrics pages on the Telemetry API, walked as they write them (bash lines,
// kubectl and istioctl changed to meshlab): observability/metrics/customize-metrics and
// observability/metrics/telemetry-api, on Bookinfo behind the ingress gateway as the
// Bookinfo page sets it up (the pages' "Before you begin").

// bookinfoBehindGateway installs Istio, applies Bookinfo and its gateway as the Bookinfo
// page does, and returns GATEWAY_URL once the product page answers through it from
// outside the cluster.
func (p *pageLab) bookinfoBehindGateway() string {
	p.t.Helper()
	p.sh(`istioctl install -y
kubectl label namespace default istio-injection=enabled
kubectl apply -f samples/bookinfo/platform/kube/bookinfo.yaml
kubectl apply -f samples/bookinfo/networking/bookinfo-gateway.yaml`)
	url := strings.TrimSpace(p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
export INGRESS_PORT=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}')
export GATEWAY_URL=$INGRESS_HOST:$INGRESS_PORT
echo "$GATEWAY_URL"`))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+:80$`).MatchString(url) {
		p.t.Fatalf("GATEWAY_URL=%q, want the ingress gateway's EXTERNAL-IP:80", url)
	}
	p.browse(url)
	p.step("Bookinfo behind its gateway, GATEWAY_URL=" + url)
	return url
}

// browse is the pages' `curl "http://$GATEWAY_URL/productpage"` from the reader's
// machine, until it gives the page with the details and reviews the product page asked
// for (so every proxy on the way has counted its request).
func (p *pageLab) browse(url string) {
	p.t.Helper()
	p.until("curl http://"+url+"/productpage: 200 with Book Details and Book Reviews", func() string {
		out, _ := p.outside("curl", "-s", "-w", "\n%{http_code}", "http://"+url+"/productpage")
		return out
	}, func(out string) bool {
		return strings.HasSuffix(out, "\n200") && strings.Contains(out, "Book Details") && strings.Contains(out, "Book Reviews") &&
			!strings.Contains(out, "Error fetching")
	})
}

// output runs the page's lines and returns what they print, whatever their status (a
// grep that finds nothing exits 1, and the pages read its empty output).
func (p *pageLab) output(lines string) string {
	out, _ := p.command(lines).CombinedOutput()
	return string(out)
}

// seriesWith returns the lines of out holding every one of labels.
func seriesWith(out string, labels ...string) []string {
	var found []string
	for _, l := range strings.Split(out, "\n") {
		ok := strings.HasPrefix(l, "istio_requests_total{")
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if ok {
			found = append(found, l)
		}
	}
	return found
}

// TestDocsCustomizeMetricsTask walks "Customizing Istio Metrics": before the page's
// Telemetry the product page's istio_requests_total has no request_host nor
// destination_port (as Istio's test of the page checks first); the page's
// custom_metrics.yaml (a namespace-wide Telemetry adding both to REQUEST_COUNT, both
// modes) written with cat and applied; the page's curl to $GATEWAY_URL; then the
// page's exec into the product page's istio-proxy for /stats/prometheus, until the new
// series carry them: the server side's request_host is the Host the reader's curl sent
// through the gateway ($INGRESS_HOST: curl leaves out port 80), the client side's
// details:9080, both on destination_port 9080.
func TestDocsCustomizeMetricsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	url := p.bookinfoBehindGateway()

	const stats = `kubectl exec "$(kubectl get pod -l app=productpage -o jsonpath='{.items[0].metadata.name}')" -c istio-proxy -- curl -sS 'localhost:15000/stats/prometheus' | grep istio_requests_total`
	before := p.sh(stats)
	if len(seriesWith(before, `reporter="destination"`)) == 0 || strings.Contains(before, "request_host") || strings.Contains(before, "destination_port") {
		t.Fatalf("the product page's istio_requests_total before the Telemetry:\n%s\nwant series without request_host and destination_port", before)
	}

	// The page writes its file in the reader's directory: here a directory of the test's.
	write := p.command(`cat <<EOF > ./custom_metrics.yaml
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: namespace-metrics
spec:
  metrics:
  - providers:
    - name: prometheus
    overrides:
    - match:
        metric: REQUEST_COUNT
      tagOverrides:
        destination_port:
          value: "string(destination.port)"
        request_host:
          value: "request.host"
EOF
kubectl apply -f custom_metrics.yaml`)
	write.Dir = t.TempDir()
	if out, err := write.CombinedOutput(); err != nil || string(out) != "telemetry.telemetry.istio.io/namespace-metrics created\n" {
		t.Fatalf("cat > custom_metrics.yaml; apply -f custom_metrics.yaml: %v\n%s", err, out)
	}
	p.step("custom_metrics.yaml applied")

	// "It might take a short period of time for the proxies to start applying the
	// config. If the metric is not received, you may retry sending requests."
	// curl sends Host without the default port: the gateway passes 10.96.0.10 on.
	server := []string{`reporter="destination"`, `destination_workload="productpage-v1"`, `destination_port="9080"`, `request_host="` + strings.TrimSuffix(url, ":80") + `"`}
	client := []string{`reporter="source"`, `destination_service="details.default.svc.cluster.local"`, `destination_port="9080"`, `request_host="details:9080"`}
	out := p.until("the product page's istio_requests_total with destination_port and request_host", func() string {
		p.browse(url)
		return p.output(stats)
	}, func(out string) bool {
		return len(seriesWith(out, server...)) > 0 && len(seriesWith(out, client...)) > 0
	})
	// The dimensions come after the standard tags, in their names' order, as
	// istio-proxy adds them.
	for _, l := range seriesWith(out, "request_host") {
		if !regexp.MustCompile(`connection_security_policy="[a-z_]+",destination_port="\d+",request_host="[^"]*"\} \d+$`).MatchString(l) {
			t.Errorf("a series with the dimensions out of istio-proxy's order:\n%s", l)
		}
	}
	p.step("istio_requests_total carries destination_port and request_host")
}
