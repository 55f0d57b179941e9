package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestMeshConfigZipkinTracer is Istio's legacy MeshConfig tracing, as its helm values
// write it with global.proxy.tracer=zipkin: no Telemetry, defaultConfig.tracing.zipkin's
// address (pilot-agent's bootstrap tracer and its zipkin cluster) and sampling 100.
// Installed with that IstioOperator, the Zipkin addon and Bookinfo behind its gateway,
// requests to the product page give Zipkin a trace joining the gateway's, the product
// page's, details' and reviews' spans with Istio's tags, made by every proxy's bootstrap
// tracer for HCMs whose tracing names no provider.
func TestMeshConfigZipkinTracer(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	install := p.command(`cat <<EOF > ./tracing.yaml
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    enableTracing: true
    defaultConfig:
      tracing:
        sampling: 100
        zipkin:
          address: zipkin.istio-system:9411
EOF
istioctl install -f ./tracing.yaml --skip-confirmation`)
	install.Dir = t.TempDir()
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "Installation complete") {
		t.Fatalf("istioctl install -f ./tracing.yaml: %v\n%s", err, out)
	}
	p.step("installed with defaultConfig.tracing.zipkin and sampling 100")
	if out := p.sh(`kubectl apply -f samples/addons/extras/zipkin.yaml`); !strings.Contains(out, "service/zipkin created") {
		t.Errorf("apply the zipkin addon:\n%s", out)
	}
	url := p.bookinfoDeployed()
	zipkin := p.addonDashboard("zipkin", `^http://localhost:\d+\n$`)
	trace := p.untilTraced(url, func() []tracedSpan { return joinedTrace(t, zipkin) })
	checkBookinfoTrace(t, trace)
	p.step("a trace of " + strconv.Itoa(len(trace)) + " spans from the bootstrap tracers, without any Telemetry")
}
