package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istio.io's distributed tracing pages (observability/distributed-tracing), walked as
// they write them (bash lines, kubectl and istioctl changed to meshlab).

// tracedSpan is a span as Zipkin's query API answers it.
type tracedSpan struct {
	TraceID, ID, ParentID, Kind, Name string
	LocalEndpoint                     struct{ ServiceName string }
	Tags                              map[string]string
}

// TestDocsZipkinTask walks "Zipkin" (distributed-tracing/zipkin) on Bookinfo: the page's
// tracing.yaml (a zipkin extension provider, legacy tracing options off) written with
// cat and installed, Zipkin installed (samples/addons/extras/zipkin.yaml, as the Zipkin
// integration page has it), the page's mesh-default Telemetry naming the provider,
// Bookinfo behind its gateway as the Bookinfo page sets it up, then the trace-generation
// boilerplate's 100 requests to the product page from the reader's machine, repeated
// while no trace has come (the default sampling is 1 %, as the boilerplate says), and
// `istioctl dashboard zipkin`: through it, Zipkin's API has a trace of
// productpage.default joining, by trace id, the spans of the ingress gateway, the
// product page, details and reviews, each child of a span of the trace; then the page's
// cleanup (the dashboard stopped with Ctrl-C, as killall istioctl does).
func TestDocsZipkinTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	url := p.tracedBookinfo(zipkinTracingYAML, "samples/addons/extras/zipkin.yaml", meshDefaultTelemetry("telemetry.istio.io/v1", "zipkin"))
	zipkin := p.addonDashboard("zipkin", `^http://localhost:\d+\n$`)
	trace := p.untilTraced(url, func() []tracedSpan { return joinedTrace(t, zipkin) })
	checkBookinfoTrace(t, trace)
	p.step("a trace of " + strconv.Itoa(len(trace)) + " spans joins the gateway, productpage, details and reviews")

	var services []string
	if err := json.Unmarshal([]byte(getOK(t, zipkin+"/api/v2/services")), &services); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"details.default", "istio-ingressgateway.istio-system", "productpage.default", "reviews.default"} {
		if !strings.Contains(strings.Join(services, ","), want) {
			t.Errorf("Zipkin's services %q lack %s", services, want)
		}
	}
}

// zipkinTracingYAML is the Zipkin page's tracing.yaml.
const zipkinTracingYAML = `apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    enableTracing: true
    defaultConfig:
      tracing: {} # disable legacy MeshConfig tracing options
    extensionProviders:
    - name: zipkin
      zipkin:
        service: zipkin.istio-system.svc.cluster.local
        port: 9411
`

// meshDefaultTelemetry is the tracing pages' mesh-default Telemetry naming provider.
func meshDefaultTelemetry(apiVersion, provider string) string {
	return `apiVersion: ` + apiVersion + `
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  tracing:
  - providers:
    - name: "` + provider + `"
`
}

// tracedBookinfo is the tracing pages' "Before you begin": tracingYAML written with cat
// as ./tracing.yaml and installed, the tracing addon applied (the pages' integrations
// install it), the page's Telemetry, and Bookinfo behind its gateway as the Bookinfo
// page sets it up. It returns GATEWAY_URL once the product page answers through it.
func (p *pageLab) tracedBookinfo(tracingYAML, addon, telemetry string) string {
	p.t.Helper()
	install := p.command("cat <<EOF > ./tracing.yaml\n" + tracingYAML + "EOF\nistioctl install -f ./tracing.yaml --skip-confirmation")
	install.Dir = p.t.TempDir()
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "Installation complete") {
		p.t.Fatalf("istioctl install -f ./tracing.yaml --skip-confirmation: %v\n%s", err, out)
	}
	p.step("installed with the page's tracing.yaml")
	if out := p.sh(`kubectl apply -f ` + addon); !strings.Contains(out, "deployment.apps/") || !strings.Contains(out, "service/zipkin created") {
		p.t.Errorf("apply %s:\n%s", addon, out)
	}
	if out := p.sh("kubectl apply -f - <<EOF\n" + telemetry + "EOF"); out != "telemetry.telemetry.istio.io/mesh-default created\n" {
		p.t.Errorf("apply the page's Telemetry: %q", out)
	}
	return p.bookinfoDeployed()
}

// bookinfoDeployed deploys Bookinfo in default (injected) behind its gateway as the
// Bookinfo page sets it up, on the Istio installed, and returns GATEWAY_URL once the
// product page answers through it.
func (p *pageLab) bookinfoDeployed() string {
	p.t.Helper()
	p.sh(`kubectl label namespace default istio-injection=enabled
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

// untilTraced sends the trace-generation boilerplate's 100 requests to the product page
// from the reader's machine, again while found has no trace (the default sampling is
// 1 %, as the boilerplate says; the proxies report every 5 s or 5 spans).
func (p *pageLab) untilTraced(url string, found func() []tracedSpan) []tracedSpan {
	p.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for sent := 0; ; {
		if time.Now().After(deadline) {
			p.t.Fatalf("no trace of productpage.default with the gateway's, details' and reviews' spans after %d requests", sent)
		}
		if out, code := p.outside("bash", "-c", `for i in $(seq 1 100); do curl -s -o /dev/null "http://`+url+`/productpage"; done`); code != 0 {
			p.t.Fatalf("100 requests to the product page: exit %d\n%s", code, out)
		}
		sent += 100
		p.step("sent " + strconv.Itoa(sent) + " requests")
		for wait := time.Now().Add(12 * time.Second); time.Now().Before(wait); time.Sleep(time.Second) {
			if tr := found(); tr != nil {
				return tr
			}
		}
	}
}

// checkBookinfoTrace checks a Bookinfo trace: every span's parent is in it, and the
// product page's server span has Istio's operation name and tags.
func checkBookinfoTrace(t *testing.T, trace []tracedSpan) {
	t.Helper()
	byID := map[string]tracedSpan{}
	for _, s := range trace {
		byID[s.ID] = s
		t.Logf("span %s parent %-16s %-6s %-34s %s", s.ID, s.ParentID, s.Kind, s.LocalEndpoint.ServiceName, s.Name)
	}
	for _, s := range trace {
		if _, ok := byID[s.ParentID]; s.ParentID != "" && !ok {
			t.Errorf("span %s (%s of %s) has parent %s, not in the trace", s.ID, s.Name, s.LocalEndpoint.ServiceName, s.ParentID)
		}
		if s.LocalEndpoint.ServiceName == "productpage.default" && s.Kind == "SERVER" &&
			(s.Tags["istio.canonical_service"] != "productpage" || s.Tags["http.status_code"] != "200" || s.Name != "productpage.default.svc.cluster.local:9080/*") {
			t.Errorf("the product page's server span %+v: want Istio's operation name and tags", s)
		}
	}
}

// joinedTrace returns a trace of productpage.default from Zipkin's API at base that has
// spans of the gateway, the product page, details and reviews, or nil.
func joinedTrace(t *testing.T, base string) []tracedSpan {
	t.Helper()
	body, err := getBody(base + "/zipkin/api/v2/traces?serviceName=productpage.default")
	if err != nil {
		return nil
	}
	var traces [][]tracedSpan
	if json.Unmarshal([]byte(body), &traces) != nil {
		t.Fatalf("Zipkin's traces of productpage.default: %.2000s", body)
	}
	for _, tr := range traces {
		seen := map[string]bool{}
		for _, s := range tr {
			if s.TraceID != tr[0].TraceID {
				t.Fatalf("a trace with spans of two trace ids: %+v", tr)
			}
			seen[s.LocalEndpoint.ServiceName] = true
		}
		if seen["istio-ingressgateway.istio-system"] && seen["productpage.default"] && seen["details.default"] && seen["reviews.default"] && complete(tr) {
			return tr
		}
	}
	return nil
}

// complete reports whether every span's parent is in the trace: the proxies report in
// batches (5 spans or 5 s), so a trace's spans arrive at different times, the gateway's
// root often last.
func complete(trace []tracedSpan) bool {
	ids := map[string]bool{}
	for _, s := range trace {
		ids[s.ID] = true
	}
	for _, s := range trace {
		if s.ParentID != "" && !ids[s.ParentID] {
			return false
		}
	}
	return true
}

// addonDashboard runs `istioctl dashboard NAME` until the test ends, checks that it
// prints istioctl's URL line (matching want) and returns the URL.
func (p *pageLab) addonDashboard(name, want string) string {
	p.t.Helper()
	cmd := exec.Command(meshlabBin(p.t), "--lab", p.name, "dashboard", name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // the page's cleanup: killall istioctl
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !regexp.MustCompile(want).MatchString(line) {
		p.t.Fatalf("istioctl dashboard %s printed %q (%v); want istioctl's line %s", name, line, err, want)
	}
	return strings.TrimSpace(line)
}

// getOK GETs url and returns its body, failing the test on an error.
func getOK(t *testing.T, url string) string {
	t.Helper()
	body, err := getBody(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return body
}

// TestDocsJaegerTask walks "Jaeger" (distributed-tracing/jaeger): the page's
// tracing.yaml (an opentelemetry provider: OTLP over gRPC to the Jaeger collector's
// 4317) installed with samples/addons/jaeger.yaml (jaegertracing's all-in-one, which
// takes OTLP), the page's Telemetry naming the provider and Bookinfo; then `istioctl
// dashboard jaeger` prints istioctl's URL and, through it, Jaeger's query API (the
// addon's base path /jaeger) has a trace of productpage.default with the gateway's,
// productpage's, details' and reviews' spans, exported by the proxies' OpenTelemetry
// tracer and joined by W3C trace context.
func TestDocsJaegerTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	const pageTracing = `apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    enableTracing: true
    defaultConfig:
      tracing: {} # disable legacy MeshConfig tracing options
    extensionProviders:
    - name: jaeger
      opentelemetry:
        port: 4317
        service: jaeger-collector.istio-system.svc.cluster.local
`
	url := p.tracedBookinfo(pageTracing, "samples/addons/jaeger.yaml", meshDefaultTelemetry("telemetry.istio.io/v1", "jaeger"))
	jaeger := p.addonDashboard("jaeger", `^http://localhost:\d+\n$`)
	trace := p.untilTraced(url, func() []tracedSpan { return jaegerTrace(t, jaeger) })
	checkBookinfoTrace(t, trace)
	p.step("Jaeger has a trace of " + strconv.Itoa(len(trace)) + " spans joining the gateway, productpage, details and reviews")
}

// jaegerTrace returns a trace of productpage.default from Jaeger's query API at base
// (under the addon's /jaeger) with spans of the gateway, the product page, details and
// reviews, as Zipkin spans, or nil.
func jaegerTrace(t *testing.T, base string) []tracedSpan {
	t.Helper()
	body, err := getBody(base + "/jaeger/api/traces?service=productpage.default&limit=20&lookback=1h")
	if err != nil {
		return nil
	}
	var ans struct {
		Data []struct {
			TraceID string `json:"traceID"`
			Spans   []struct {
				TraceID, SpanID, OperationName, ProcessID string
				References                                []struct{ RefType, SpanID string }
				Tags                                      []struct{ Key, Value string }
			}
			Processes map[string]struct{ ServiceName string }
		}
	}
	if json.Unmarshal([]byte(body), &ans) != nil {
		t.Fatalf("Jaeger's traces of productpage.default: %.2000s", body)
	}
	for _, tr := range ans.Data {
		var out []tracedSpan
		seen := map[string]bool{}
		for _, s := range tr.Spans {
			ts := tracedSpan{TraceID: s.TraceID, ID: s.SpanID, Name: s.OperationName, Tags: map[string]string{}}
			ts.LocalEndpoint.ServiceName = tr.Processes[s.ProcessID].ServiceName
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					ts.ParentID = r.SpanID
				}
			}
			for _, kv := range s.Tags {
				ts.Tags[kv.Key] = kv.Value
			}
			ts.Kind = strings.ToUpper(ts.Tags["span.kind"])
			seen[ts.LocalEndpoint.ServiceName] = true
			out = append(out, ts)
		}
		if seen["istio-ingressgateway.istio-system"] && seen["productpage.default"] && seen["details.default"] && seen["reviews.default"] && complete(out) {
			return out
		}
	}
	return nil
}

// TestDocsTracingTelemetryAPITask walks "Configure tracing with Telemetry API"
// (distributed-tracing/telemetry-api): its tracing.yaml installed with
// --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true, Zipkin, its
// mesh-default Telemetry (v1alpha1) enabling tracing for the mesh, then its customized
// sampling (randomSamplingPercentage 100) with its custom tags (a literal, an
// environment variable with its default, a request header): one request to the product
// page is then traced, every span of it carrying the three tags.
func TestDocsTracingTelemetryAPITask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	tracing := strings.Replace(zipkinTracingYAML, "# disable legacy MeshConfig tracing options", "# disabled MeshConfig tracing options", 1)
	install := p.command("cat <<EOF > ./tracing.yaml\n" + tracing + "EOF\nistioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true -f ./tracing.yaml --skip-confirmation")
	install.Dir = t.TempDir()
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "Installation complete") {
		t.Fatalf("istioctl install --set ... -f ./tracing.yaml: %v\n%s", err, out)
	}
	p.sh(`kubectl apply -f samples/addons/extras/zipkin.yaml
kubectl label namespace default istio-injection=enabled
kubectl apply -f samples/bookinfo/platform/kube/bookinfo.yaml
kubectl apply -f samples/bookinfo/networking/bookinfo-gateway.yaml`)
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  tracing:
    - providers:
        - name: "zipkin"
EOF`); out != "telemetry.telemetry.istio.io/mesh-default created\n" {
		t.Errorf("enable tracing for mesh: %q", out)
	}
	url := strings.TrimSpace(p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
export INGRESS_PORT=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}')
echo "$INGRESS_HOST:$INGRESS_PORT"`))
	p.browse(url)
	// The page's customizing sections, in one Telemetry: sampling at 100 % and its
	// literal, environment and header tags (the header one's placeholders filled in).
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  tracing:
    - providers:
        - name: "zipkin"
      randomSamplingPercentage: 100.00
      customTags:
        "provider":
          literal:
            value: "zipkin"
        "cluster_id":
          environment:
            name: ISTIO_META_CLUSTER_ID
            defaultValue: Kubernetes # optional
        my_tag_header:
          header:
            name: x-reader
            defaultValue: nobody      # optional
EOF`); out != "telemetry.telemetry.istio.io/mesh-default configured\n" {
		t.Errorf("customizing trace sampling and tags: %q", out)
	}
	p.step("sampling at 100 % with custom tags")
	zipkin := p.addonDashboard("zipkin", `^http://localhost:\d+\n$`)
	var trace []tracedSpan
	p.until("one request to the product page traced with the page's custom tags", func() string {
		_, _ = p.outside("curl", "-s", "-o", "/dev/null", "-H", "x-reader: trace10", "http://"+url+"/productpage")
		time.Sleep(6 * time.Second) // a flush: every 5 s, or 5 spans
		trace = nil
		body, _ := getBody(zipkin + "/api/v2/traces?serviceName=istio-ingressgateway.istio-system&limit=50")
		var traces [][]tracedSpan
		_ = json.Unmarshal([]byte(body), &traces)
		for _, tr := range traces {
			for _, s := range tr {
				if s.Tags["my_tag_header"] == "trace10" {
					trace = tr
				}
			}
		}
		return body
	}, func(string) bool { return trace != nil })
	for _, s := range trace {
		if s.Tags["provider"] != "zipkin" || s.Tags["cluster_id"] == "" || s.Tags["istio.canonical_service"] == "" {
			t.Errorf("span %s of %s (%s): tags %v, want provider=zipkin, cluster_id and Istio's", s.ID, s.LocalEndpoint.ServiceName, s.Name, s.Tags)
		}
	}
	checkBookinfoTrace(t, trace)
}
