package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsOTelProviderLogsTask walks "OpenTelemetry" access logs
// (tasks/observability/logs/otel-provider): the page's mesh config (accessLogFile and
// the otel envoyOtelAls provider to the collector in istio-system, as its istio
// ConfigMap shows them) in the reader's IstioOperator, installed with istioctl install
// -f (its "Using Mesh Config" also sets defaultProviders envoy and otel, which would make
// httpbin's proxy log to the collector too: kubectl logs -l shows each pod's last 10
// lines, so the page's check reads sleep's record only when sleep alone sends; the unit
// tests hold defaultProviders); the collector of samples/open-telemetry/otel.yaml applied in
// istio-system (the page's collector boilerplate, as its clean up deletes it); sleep and
// httpbin; the page's Telemetry sleep-logging; its curl from sleep to
// httpbin:8000/status/418 (418, server: envoy; go-httpbin's teapot); then its kubectl logs -l
// app=opentelemetry-collector -n istio-system until the collector printed sleep's record
// of that request (outbound|8000||httpbin.default.svc.cluster.local, as Istio's test of
// the page checks), in the collector's debug exporter form; then the page's clean up
// and its install --set profile=default, which takes the providers away.
func TestDocsOTelProviderLogsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	iop := filepath.Join(t.TempDir(), "istio-operator.yaml")
	if err := os.WriteFile(iop, []byte(`apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    accessLogFile: /dev/stdout
    extensionProviders:
    - name: otel
      envoyOtelAls:
        service: opentelemetry-collector.istio-system.svc.cluster.local
        port: 4317
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.sh("istioctl install -f " + iop + " -y")
	p.sh(`kubectl apply -f samples/open-telemetry/otel.yaml -n istio-system
kubectl label namespace default istio-injection=enabled --overwrite
kubectl apply -f samples/sleep/sleep.yaml
kubectl apply -f samples/httpbin/httpbin.yaml`)
	if out := p.sh(`cat <<EOF | kubectl apply -n default -f -
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: sleep-logging
spec:
  selector:
    matchLabels:
      app: sleep
  accessLogging:
    - providers:
      - name: otel
EOF`); out != "telemetry.telemetry.istio.io/sleep-logging created\n" {
		t.Errorf("apply sleep-logging: %q", out)
	}
	p.step("collector, sleep, httpbin and sleep-logging applied")

	const curl = `export SOURCE_POD=$(kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name})
kubectl exec "$SOURCE_POD" -c sleep -- curl -sS -v httpbin:8000/status/418`
	// Today's samples/httpbin runs go-httpbin, which answers 418 with Go's reason and
	// "I'm a teapot!" where the page shows kennethreitz httpbin's "Unknown" and teapot.
	p.until("curl httpbin:8000/status/418 from sleep: 418 through the sidecars", func() string { return p.output(curl) }, func(out string) bool {
		return strings.Contains(out, "< HTTP/1.1 418 I'm a teapot") && strings.Contains(out, "< server: envoy") && strings.Contains(out, "I'm a teapot!")
	})
	p.step("418 from httpbin")
	logs := p.until("the collector's log of sleep's request", func() string {
		return p.output(`kubectl logs -l app=opentelemetry-collector -n istio-system`)
	}, func(out string) bool {
		return strings.Contains(out, "outbound|8000||httpbin.default.svc.cluster.local")
	})
	// kubectl logs -l prints each pod's last 10 lines: the end of the exporter's record.
	for _, want := range []string{"SeverityNumber: Unspecified(0)\n", `Body: Str([`, `"GET /status/418 HTTP/1.1" 418 - via_upstream`, "Flags: 0\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("kubectl logs -l app=opentelemetry-collector:\n%s\nwant %q (the debug exporter's record)", logs, want)
		}
	}
	p.step("the collector printed sleep's access log record")

	p.sh(`kubectl delete telemetry sleep-logging
kubectl delete -f samples/sleep/sleep.yaml
kubectl delete -f samples/httpbin/httpbin.yaml
kubectl delete -f samples/open-telemetry/otel.yaml -n istio-system`)
	// The page's line has no -y: istioctl asks, the reader answers y.
	install := p.command(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=default`)
	install.Stdin = strings.NewReader("y\n")
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "✔ Installation complete") {
		t.Errorf("install --set profile=default: %v\n%s", err, out)
	}
	if out := p.sh(`kubectl get configmap istio -n istio-system -o yaml`); strings.Contains(out, "envoyOtelAls") {
		t.Errorf("the mesh config still has the otel provider after install --set profile=default:\n%s", out)
	}
}
