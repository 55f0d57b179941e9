package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// collectorSpan is a span as the OpenTelemetry Collector's debug exporter prints it:
// its resource's service.name, its fields (Trace ID, Parent ID, ID, Name, Kind, ...) and
// its attributes with their order.
type collectorSpan struct {
	service string
	fields  map[string]string
	attrs   map[string]string
	order   []string
}

// collectorSpans reads the spans of the debug exporter's detailed output.
func collectorSpans(out string) []collectorSpan {
	var spans []collectorSpan
	service, inResource := "", false
	var cur *collectorSpan
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "ResourceSpans #"); i >= 0 {
			service, cur, inResource = "", nil, false
			continue
		}
		switch {
		case strings.HasPrefix(line, "Resource attributes:"):
			inResource = true
		case strings.HasPrefix(line, "ScopeSpans #"):
			inResource = false
		case strings.HasPrefix(line, "Span #"):
			spans = append(spans, collectorSpan{service: service, fields: map[string]string{}, attrs: map[string]string{}})
			cur = &spans[len(spans)-1]
		case strings.HasPrefix(line, "     -> "):
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "     -> "), ": ")
			if !ok {
				continue
			}
			v = strings.TrimSuffix(strings.TrimPrefix(v, "Str("), ")")
			if inResource {
				if k == "service.name" {
					service = v
				}
			} else if cur != nil {
				cur.attrs[k] = v
				cur.order = append(cur.order, k)
			}
		case strings.HasPrefix(line, "    ") && cur != nil:
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "    "), ": ")
			if ok {
				cur.fields[strings.TrimSpace(k)] = v
			}
		}
	}
	return spans
}

// TestDocsOpenTelemetryTracingTask walks "OpenTelemetry" (distributed-tracing/
// opentelemetry): the collector boilerplate (namespace observability, the sample's
// otel.yaml), the page's OTLP/HTTP install as its snip writes it (cat | istioctl install
// --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true -y -f -: the
// otel-tracing provider to the collector's 4318 with path, timeout, header and the
// environment resource detector), its otel-demo Telemetry (100 %, the literal
// my-attribute), Bookinfo behind its gateway and the trace-generation boilerplate's
// requests; then the collector's logs show, as the page's example, productpage's
// CLIENT span to reviews under resource service.name productpage.default with Envoy's
// attributes in Envoy's order, Istio's tags and my-attribute, and reviews' SERVER span
// of the same trace as its child (the W3C context crossed the hop); then the page's
// cleanup.
func TestDocsOpenTelemetryTracingTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	if out := p.sh(`kubectl create namespace observability
kubectl apply -f samples/open-telemetry/otel.yaml -n observability`); !strings.Contains(out, "namespace/observability created") || !strings.Contains(out, "service/opentelemetry-collector created") {
		t.Fatalf("the collector boilerplate:\n%s", out)
	}
	p.step("collector applied in observability")
	if out := p.sh(`cat <<EOF | istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true -y -f -
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    enableTracing: true
    extensionProviders:
    - name: otel-tracing
      opentelemetry:
        port: 4318
        service: opentelemetry-collector.observability.svc.cluster.local
        http:
          path: "/v1/traces"
          timeout: 5s
          headers:
            - name: "custom-header"
              value: "custom value"
        resource_detectors:
          environment: {}
EOF`); !strings.Contains(out, "Installation complete") {
		t.Fatalf("install the page's OTLP/HTTP provider:\n%s", out)
	}
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: otel-demo
spec:
  tracing:
  - providers:
    - name: otel-tracing
    randomSamplingPercentage: 100
    customTags:
      "my-attribute":
        literal:
          value: "default-value"
EOF`); out != "telemetry.telemetry.istio.io/otel-demo created\n" {
		t.Errorf("apply otel-demo: %q", out)
	}
	url := p.bookinfoDeployed()
	if out, code := p.outside("bash", "-c", `for i in $(seq 1 100); do curl -s -o /dev/null "http://`+url+`/productpage"; done`); code != 0 {
		t.Fatalf("100 requests to the product page: exit %d\n%s", code, out)
	}
	p.step("sent 100 requests")
	var client, server collectorSpan
	deadline := time.Now().Add(90 * time.Second)
	for found := false; !found; time.Sleep(2 * time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the collector's logs have no productpage CLIENT span to reviews with its reviews SERVER child:\n%.6000s", p.output(`kubectl -n observability logs deploy/opentelemetry-collector`))
		}
		spans := collectorSpans(p.output(`kubectl -n observability logs deploy/opentelemetry-collector`))
		for _, c := range spans {
			if c.service != "productpage.default" || c.fields["Kind"] != "Client" || c.attrs["upstream_cluster"] != "outbound|9080||reviews.default.svc.cluster.local" {
				continue
			}
			for _, s := range spans {
				if s.service == "reviews.default" && s.fields["Kind"] == "Server" && s.fields["Trace ID"] == c.fields["Trace ID"] && s.fields["Parent ID"] == c.fields["ID"] {
					client, server, found = c, s, true
				}
			}
		}
	}
	p.step("productpage's span to reviews and reviews' span of trace " + client.fields["Trace ID"])
	for k, want := range map[string]string{
		"http.method": "GET", "http.status_code": "200", "component": "proxy", "response_flags": "-", "downstream_cluster": "-",
		"istio.canonical_service": "productpage", "istio.canonical_revision": "v1", "istio.namespace": "default", "istio.mesh_id": "cluster.local",
		"istio.cluster_id": "Kubernetes", "my-attribute": "default-value", "upstream_cluster.name": "outbound|9080||reviews.default.svc.cluster.local",
	} {
		if client.attrs[k] != want {
			t.Errorf("productpage's span: %s = %q, want %q (the page's example)", k, client.attrs[k], want)
		}
	}
	if !strings.HasPrefix(client.attrs["node_id"], "sidecar~") || !strings.Contains(client.attrs["node_id"], "~productpage-v1-") ||
		!strings.HasPrefix(client.attrs["http.url"], "http://reviews:9080/reviews/") || client.fields["Status code"] != "Unset" {
		t.Errorf("productpage's span: %+v", client)
	}
	if got := strings.Join(client.order[:3], " "); got != "node_id zone guid:x-request-id" {
		t.Errorf("productpage's span's first attributes %q, want the page's node_id zone guid:x-request-id", got)
	}
	if server.attrs["istio.canonical_service"] != "reviews" || server.attrs["my-attribute"] != "default-value" {
		t.Errorf("reviews' span: %+v", server)
	}

	if out := p.sh(`kubectl delete telemetry otel-demo`); out != "telemetry.telemetry.istio.io \"otel-demo\" deleted\n" {
		t.Errorf("delete otel-demo: %q", out)
	}
	if out := p.sh(`kubectl delete -f samples/open-telemetry/otel.yaml -n observability
kubectl delete namespace observability`); !strings.Contains(out, "namespace \"observability\" deleted") {
		t.Errorf("the page's clean up:\n%s", out)
	}
	p.step("cleaned up after " + strconv.Itoa(len(client.order)) + "-attribute spans")
}

// samplingOf returns the random sampling percentages of the HCMs in istioctl
// proxy-config listeners -o json output, in order.
func samplingOf(out string) []string {
	var found []string
	for _, m := range regexp.MustCompile(`"randomSampling": \{\s*"value": ([0-9.]+)\s*\}`).FindAllStringSubmatch(out, -1) {
		found = append(found, m[1])
	}
	return found
}

// TestDocsTraceSamplingTask walks "Trace Sampling" (distributed-tracing/sampling) with
// the collector boilerplate: globally via MeshConfig (its install with
// defaultConfig.tracing.sampling 10 and the OTLP/gRPC otel-tracing provider, then its
// mesh-default Telemetry without randomSamplingPercentage): the proxies' HCMs sample
// 10 %, and of the trace-generation boilerplate's 100 requests through the gateway the
// collector gets some traces, not all; then via the Telemetry API (its install without
// sampling, its otel-demo Telemetry with randomSamplingPercentage 10 in default):
// Bookinfo's proxies sample 10 % and the gateway istiod's 1 %; then its clean up.
func TestDocsTraceSamplingTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	p.sh(`kubectl create namespace observability
kubectl apply -f samples/open-telemetry/otel.yaml -n observability`)
	const install = `cat <<EOF | istioctl install -y -f -
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    enableTracing: true
%s    extensionProviders:
    - name: otel-tracing
      opentelemetry:
        port: 4317
        service: opentelemetry-collector.observability.svc.cluster.local
        resource_detectors:
          environment: {}
EOF`
	if out := p.sh(fmt.Sprintf(install, "    defaultConfig:\n      tracing:\n        sampling: 10\n")); !strings.Contains(out, "Installation complete") {
		t.Fatalf("install_default_sampling:\n%s", out)
	}
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  tracing:
  - providers:
    - name: otel-tracing
EOF`); out != "telemetry.telemetry.istio.io/mesh-default created\n" {
		t.Errorf("enable_telemetry_no_sampling: %q", out)
	}
	url := p.bookinfoDeployed()
	const pods = `export PRODUCTPAGE=$(kubectl get pod -l app=productpage -o jsonpath={.items..metadata.name})
export GATEWAY=$(kubectl get pod -n istio-system -l app=istio-ingressgateway -o jsonpath={.items..metadata.name})
`
	productpage := func() []string {
		return samplingOf(p.output(pods + `istioctl proxy-config listeners "$PRODUCTPAGE" --port 9080 -o json`))
	}
	gateway := func() []string {
		return samplingOf(p.output(pods + `istioctl proxy-config listeners "$GATEWAY" -n istio-system --port 8080 -o json`))
	}
	if got := productpage(); !allAre(strings.Join(got, ","), "10") {
		t.Errorf("productpage's HCMs sample %v, want 10 (defaultConfig.tracing.sampling)", got)
	}
	if out, code := p.outside("bash", "-c", `for i in $(seq 1 100); do curl -s -o /dev/null "http://`+url+`/productpage"; done`); code != 0 {
		t.Fatalf("100 requests to the product page: exit %d\n%s", code, out)
	}
	p.step("sent 100 requests at 10 %")
	time.Sleep(8 * time.Second) // the proxies flush every 5 s
	traces := map[string]bool{}
	for _, s := range collectorSpans(p.output(`kubectl -n observability logs deploy/opentelemetry-collector`)) {
		if s.service == "istio-ingressgateway.istio-system" && s.fields["Kind"] == "Server" && s.fields["Parent ID"] == "" {
			traces[s.fields["Trace ID"]] = true
		}
	}
	// At 10 % of 100 requests (and the few of browse), none or more than 40 traces
	// happen with a probability under 1e-4.
	if n := len(traces); n < 1 || n > 40 {
		t.Errorf("the collector got %d traces of the gateway for about 100 requests at 10 %%", n)
	}
	p.step(strconv.Itoa(len(traces)) + " traces at 10 %")

	if out := p.sh(fmt.Sprintf(install, "")); !strings.Contains(out, "Installation complete") {
		t.Fatalf("install_without_sampling:\n%s", out)
	}
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
   name: otel-demo
spec:
  tracing:
  - providers:
    - name: otel-tracing
    randomSamplingPercentage: 10
EOF`); out != "telemetry.telemetry.istio.io/otel-demo created\n" {
		t.Errorf("enable_telemetry_with_sampling: %q", out)
	}
	p.until("productpage sampling 10 % and the gateway 1 %", func() string {
		return strings.Join(productpage(), ",") + " " + strings.Join(gateway(), ",")
	}, func(out string) bool {
		pp, gw, _ := strings.Cut(out, " ")
		return allAre(pp, "10") && allAre(gw, "1")
	})
	p.step("Telemetry API: productpage 10 %, the gateway 1 %")

	if out := p.sh(`kubectl delete telemetry otel-demo`); out != "telemetry.telemetry.istio.io \"otel-demo\" deleted\n" {
		t.Errorf("cleanup_telemetry: %q", out)
	}
	p.sh(`kubectl delete -f samples/open-telemetry/otel.yaml -n observability
kubectl delete namespace observability`)
}

// allAre reports whether the comma-separated list has values and all are want.
func allAre(list, want string) bool {
	if list == "" {
		return false
	}
	for _, v := range strings.Split(list, ",") {
		if v != want {
			return false
		}
	}
	return true
}
