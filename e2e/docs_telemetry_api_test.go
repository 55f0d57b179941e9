package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsTelemetryAPIMetricsTask walks "Customizing Istio Metrics with Telemetry API":
// each of the page's Telemetries (root namespace) applied with kubectl apply -f -, the
// page's traffic, then its two checks, `istioctl x es <productpage> -oprom` without the
// destination reporter and `istioctl x es <details> -oprom`, each grepped for
// istio_requests_total, read as Istio's test of the page reads them: remove-tags leaves
// no grpc_response_status; custom-tags adds destination_x (the upstream peer's app label)
// on the client side and source_x on the server side; remove-all-metrics and
// remove-request-count leave both empty; remove-client empties the product page's client
// side only, remove-server the details' server side only; between two, `kubectl delete
// telemetry --all -nistio-system`. As Istio's test, the pods are restarted after each
// Telemetry (kubectl rollout restart, then rollout status): a proxy keeps the series it
// counted under the previous config, as Envoy's stats do.
func TestDocsTelemetryAPIMetricsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	url := p.bookinfoBehindGateway()

	const (
		clientSide = `istioctl x es "$(kubectl get pod -l app=productpage -o jsonpath='{.items[0].metadata.name}')" -oprom | grep istio_requests_total | grep -v TYPE |grep -v 'reporter="destination"'`
		details    = `istioctl x es "$(kubectl get pod -l app=details -o jsonpath='{.items[0].metadata.name}')" -oprom | grep istio_requests_total`
	)
	var restarted time.Time
	apply := func(name, yaml string) {
		t.Helper()
		if out := p.sh("kubectl apply -f - <<EOF\n" + yaml + "EOF"); out != "telemetry.telemetry.istio.io/"+name+" created\n" {
			t.Fatalf("apply %s: %q", name, out)
		}
		// restartedAt has kubectl's one-second resolution, and a lab runs a round in less:
		// a restart in the same second as the last is refused (kubectl's "already been
		// triggered within the past second"), so wait for the next second, as Istio's
		// own tests sleep a second between restarts.
		time.Sleep(time.Until(restarted.Truncate(time.Second).Add(time.Second)))
		restarted = time.Now()
		p.sh(`kubectl rollout restart deployment productpage-v1 details-v1
kubectl rollout status deployment/productpage-v1
kubectl rollout status deployment/details-v1`)
		p.browse(url)
		p.step(name + " applied, pods restarted, traffic sent")
	}
	cleanup := func() {
		t.Helper()
		p.sh(`kubectl delete telemetry --all -nistio-system`)
	}
	// check reads a page's check until ok accepts it: the first requests after a restart
	// may reach a proxy before its config (the page: "retry sending requests after a
	// short wait").
	check := func(what, lines string, ok func(string) bool) {
		t.Helper()
		p.until(what, func() string {
			p.browse(url)
			return p.output(lines)
		}, ok)
	}
	empty := func(out string) bool { return out == "" }

	apply("remove-tags", `apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: remove-tags
  namespace: istio-system
spec:
  metrics:
    - providers:
        - name: prometheus
      overrides:
        - match:
            mode: CLIENT_AND_SERVER
            metric: REQUEST_COUNT
          tagOverrides:
            grpc_response_status:
              operation: REMOVE
`)
	check("the product page's client series without grpc_response_status", clientSide, func(out string) bool {
		return len(seriesWith(out, `reporter="source"`)) > 0 && !strings.Contains(out, "grpc_response_status")
	})
	cleanup()

	apply("custom-tags", `apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: custom-tags
  namespace: istio-system
spec:
  metrics:
    - overrides:
        - match:
            metric: REQUEST_COUNT
            mode: CLIENT
          tagOverrides:
            destination_x:
              value: upstream_peer.labels['app'].value
        - match:
            metric: REQUEST_COUNT
            mode: SERVER
          tagOverrides:
            source_x:
              value: downstream_peer.labels['app'].value
      providers:
        - name: prometheus
`)
	check(`the product page's client series with destination_x="details"`, clientSide, func(out string) bool {
		return len(seriesWith(out, `destination_workload="details-v1"`, `destination_x="details"`)) > 0
	})
	check(`the details' server series with source_x="productpage"`, details, func(out string) bool {
		return len(seriesWith(out, `reporter="destination"`, `source_x="productpage"`)) > 0
	})
	cleanup()

	apply("remove-all-metrics", `apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: remove-all-metrics
  namespace: istio-system
spec:
  metrics:
    - providers:
        - name: prometheus
      overrides:
        - disabled: true
          match:
            mode: CLIENT_AND_SERVER
            metric: ALL_METRICS
`)
	check("the product page's client series: none", clientSide, empty)
	check("the details' series: none", details, empty)
	cleanup()

	apply("remove-request-count", `apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: remove-request-count
  namespace: istio-system
spec:
  metrics:
    - providers:
        - name: prometheus
      overrides:
        - disabled: true
          match:
            mode: CLIENT_AND_SERVER
            metric: REQUEST_COUNT
`)
	check("the product page's client series: none", clientSide, empty)
	check("the details' series: none", details, empty)
	cleanup()

	apply("remove-client", `apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: remove-client
  namespace: istio-system
spec:
  metrics:
    - providers:
        - name: prometheus
      overrides:
        - disabled: true
          match:
            mode: CLIENT
            metric: REQUEST_COUNT
`)
	check("the product page's client series: none", clientSide, empty)
	check("the details' server series with response_code", details, func(out string) bool { return strings.Contains(out, "response_code") })
	cleanup()

	apply("remove-server", `apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: remove-server
  namespace: istio-system
spec:
  metrics:
    - providers:
        - name: prometheus
      overrides:
        - disabled: true
          match:
            mode: SERVER
            metric: REQUEST_COUNT
`)
	check("the product page's client series with response_code", clientSide, func(out string) bool { return strings.Contains(out, "response_code") })
	check("the details' series: none", details, empty)
	cleanup()
}

// TestRolloutRestartWithinASecond holds kubectl's refusal of a second restart in the same
// second (restartedAt has a second's resolution, so the template would not change and no
// pod would restart): the second restart names the Deployment and exits 1, and prints no
// "restarted" for it. Two restarts right after each other fall in one second on most
// tries; the test tries until one does.
func TestRolloutRestartWithinASecond(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`kubectl apply -f samples/httpbin/httpbin.yaml
kubectl rollout status deployment/httpbin`)
	for try := 0; try < 10; try++ {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) // the start of a second
		first := p.sh(`kubectl rollout restart deployment httpbin`)
		if first != "deployment.apps/httpbin restarted\n" {
			t.Fatalf("first restart printed %q", first)
		}
		out, err := p.command(`kubectl rollout restart deployment httpbin`).CombinedOutput()
		if err == nil {
			continue // the second one fell in the next second: a real restart
		}
		var exit *exec.ExitError
		want := "error: failed to create patch for httpbin: if restart has already been triggered within the past second, please wait before attempting to trigger another"
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) || strings.Contains(string(out), "restarted") {
			t.Fatalf("second restart within the second: %v\n%s\nwant exit 1 and %q", err, out, want)
		}
		return
	}
	t.Fatal("no two restarts fell in one second in 10 tries")
}
