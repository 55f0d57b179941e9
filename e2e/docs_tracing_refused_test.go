package e2e

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// The first lines of istio.io's distributed tracing pages whose tracer meshlab's
// proxies do not have (SkyWalking, OpenCensus): the page's IstioOperator, installed as
// the jaeger and zipkin pages install theirs, is refused naming the provider's field
// and saying which zipkin provider to write instead, and nothing is installed; the
// page's mesh-default Telemetry (sampling at 100 %, no provider) applies.

// refusedInstall installs the page's IstioOperator as ./tracing.yaml and wants it
// refused with every one of want in what meshlab prints.
func (p *pageLab) refusedInstall(iop string, want ...string) {
	p.t.Helper()
	cmd := p.command("cat <<EOF > ./tracing.yaml\n" + iop + "EOF\nistioctl install -f ./tracing.yaml --skip-confirmation")
	cmd.Dir = p.t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil {
		p.t.Fatalf("istioctl install of the page's IstioOperator succeeded:\n%s\nwant it refused", out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			p.t.Fatalf("istioctl install of the page's IstioOperator:\n%s\nwant %q in it", out, w)
		}
	}
	if strings.Contains(string(out), "Installation complete") {
		p.t.Fatalf("istioctl install printed success beside its refusal:\n%s", out)
	}
}

// pageMeshDefaultSampling is the SkyWalking and OpenCensus pages' Telemetry: sampling at
// 100 % with the mesh's default provider.
const pageMeshDefaultSampling = `kubectl apply -f - <<EOF
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  tracing:
  - randomSamplingPercentage: 100.00
EOF`

// TestDocsSkywalkingTask walks the first lines of "Apache SkyWalking"
// (distributed-tracing/skywalking): its IstioOperator (a skywalking provider as the
// default tracer) is refused by name with the zipkin provider to use; the page's
// Telemetry applies; `istioctl dashboard skywalking` without SkyWalking installed says
// what istioctl says.
func TestDocsSkywalkingTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.refusedInstall(`apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    defaultProviders:
      tracing:
      - "skywalking"
    enableTracing: true
    extensionProviders:
    - name: "skywalking"
      skywalking:
        service: tracing.istio-system.svc.cluster.local
        port: 11800
`, "spec.extensionProviders[0].skywalking: is not supported by meshlab", "meshlab's proxies have no SkyWalking tracer",
		"name a zipkin provider (samples/addons/extras/zipkin.yaml, zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411})")
	p.step("the page's skywalking provider refused, naming the zipkin provider to use")
	if out := p.sh(pageMeshDefaultSampling); !strings.Contains(out, "telemetry.telemetry.istio.io/mesh-default created") {
		t.Fatalf("the page's Telemetry: %s", out)
	}
	out, err := p.command("istioctl dashboard skywalking").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no pods found with selector app=skywalking-ui") {
		t.Fatalf("istioctl dashboard skywalking without SkyWalking: %v\n%s\nwant istioctl's no pods found", err, out)
	}
	p.step("dashboard skywalking: no pods found, as istioctl without the addon")
}

// TestDocsOpenCensusAgentTask walks the first lines of "OpenCensus Agent"
// (distributed-tracing/opencensusagent): its IstioOperator (an opencensus provider with
// W3C trace context as the default tracer) is refused by name with the zipkin provider
// to use; the page's Telemetry applies.
func TestDocsOpenCensusAgentTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.refusedInstall(`apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
    meshConfig:
        defaultProviders:
            tracing:
            - "opencensus"
        enableTracing: true
        extensionProviders:
        - name: "opencensus"
          opencensus:
              service: "opentelemetry-collector.istio-system.svc.cluster.local"
              port: 55678
              context:
              - W3C_TRACE_CONTEXT
`, "spec.extensionProviders[0].opencensus: is not supported by meshlab", "meshlab's proxies have no OpenCensus tracer (Envoy removed it)",
		"name a zipkin provider (samples/addons/extras/zipkin.yaml, zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411})")
	p.step("the page's opencensus provider refused, naming the zipkin provider to use")
	if out := p.sh(pageMeshDefaultSampling); !strings.Contains(out, "telemetry.telemetry.istio.io/mesh-default created") {
		t.Fatalf("the page's Telemetry: %s", out)
	}
	p.step("the page's mesh-default Telemetry applied")
}
