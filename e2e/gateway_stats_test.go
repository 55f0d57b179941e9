package e2e

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestGatewayStatsFollowTelemetry: the ingress gateway carries istio.stats as istiod
// gives a gateway (the gateway listener class: client metrics, reporter by the
// listener's outbound direction, the outbound peer_metadata filter): after requests
// through it, its /stats/prometheus (the docs' `kubectl exec <gateway pod> -- curl
// localhost:15000/stats/prometheus`) holds istio_requests_total with reporter="source",
// the gateway as source workload and productpage as destination, and the product page's
// own series name the gateway as their source (the peer metadata the gateway sent). A
// root-namespace Telemetry's tagOverride (the customize-metrics page's request_host)
// reaches the gateway's series too. Before, gateways had no istio.stats at all.
func TestGatewayStatsFollowTelemetry(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	url := p.bookinfoBehindGateway()

	const gatewayStats = `kubectl exec -n istio-system deploy/istio-ingressgateway -- curl -sS 'localhost:15000/stats/prometheus' | grep istio_requests_total`
	gateway := []string{`reporter="source"`, `source_workload="istio-ingressgateway"`, `source_workload_namespace="istio-system"`,
		`destination_workload="productpage-v1"`, `destination_service="productpage.default.svc.cluster.local"`, `response_code="200"`}
	out := p.until("the gateway's istio_requests_total to productpage", func() string {
		p.browse(url)
		return p.output(gatewayStats)
	}, func(out string) bool { return len(seriesWith(out, gateway...)) > 0 })
	t.Logf("the gateway's series: %s", strings.Join(seriesWith(out, gateway...), "\n"))
	p.step("the gateway reports istio_requests_total (reporter source)")

	const productpageStats = `kubectl exec "$(kubectl get pod -l app=productpage -o jsonpath='{.items[0].metadata.name}')" -c istio-proxy -- curl -sS 'localhost:15000/stats/prometheus' | grep istio_requests_total`
	if s := seriesWith(p.output(productpageStats), `reporter="destination"`, `source_workload="istio-ingressgateway"`, `destination_workload="productpage-v1"`); len(s) == 0 {
		t.Errorf("the product page's istio_requests_total has no series from the gateway (source_workload istio-ingressgateway):\n%s", p.output(productpageStats))
	}

	write := p.command(`cat <<EOF | kubectl apply -f -
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  metrics:
  - providers:
    - name: prometheus
    overrides:
    - match:
        metric: REQUEST_COUNT
        mode: CLIENT
      tagOverrides:
        request_host:
          value: "request.host"
EOF`)
	if out, err := write.CombinedOutput(); err != nil {
		t.Fatalf("apply the root namespace's Telemetry: %v\n%s", err, out)
	}
	withHost := append(gateway, `request_host="`+strings.TrimSuffix(url, ":80")+`"`)
	p.until("the gateway's istio_requests_total with request_host", func() string {
		p.browse(url)
		return p.output(gatewayStats)
	}, func(out string) bool { return len(seriesWith(out, withHost...)) > 0 })
	p.step("the root namespace's Telemetry reaches the gateway")
}
