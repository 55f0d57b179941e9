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

	install := p.command(`cat <<EOF > ./tracing.yaml
apiVersion: install.istio.io/v1alpha1
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
EOF
istioctl install -f ./tracing.yaml --skip-confirmation`)
	install.Dir = t.TempDir()
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "Installation complete") {
		t.Fatalf("istioctl install -f ./tracing.yaml --skip-confirmation: %v\n%s", err, out)
	}
	p.step("installed with the page's tracing.yaml")
	if out := p.sh(`kubectl apply -f samples/addons/extras/zipkin.yaml`); !strings.Contains(out, "deployment.apps/zipkin created") || !strings.Contains(out, "service/zipkin created") {
		t.Errorf("apply samples/addons/extras/zipkin.yaml:\n%s", out)
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
    - name: "zipkin"
EOF`); out != "telemetry.telemetry.istio.io/mesh-default created\n" {
		t.Errorf("apply the page's Telemetry: %q", out)
	}
	p.sh(`kubectl label namespace default istio-injection=enabled
kubectl apply -f samples/bookinfo/platform/kube/bookinfo.yaml
kubectl apply -f samples/bookinfo/networking/bookinfo-gateway.yaml`)
	url := strings.TrimSpace(p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
export INGRESS_PORT=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}')
export GATEWAY_URL=$INGRESS_HOST:$INGRESS_PORT
echo "$GATEWAY_URL"`))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+:80$`).MatchString(url) {
		t.Fatalf("GATEWAY_URL=%q, want the ingress gateway's EXTERNAL-IP:80", url)
	}
	p.browse(url)
	p.step("Bookinfo behind its gateway, GATEWAY_URL=" + url)

	zipkin := p.addonDashboard("zipkin", `^http://localhost:\d+\n$`)
	var trace []tracedSpan
	deadline := time.Now().Add(4 * time.Minute)
	for sent := 0; trace == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no trace of productpage.default with the gateway's, details' and reviews' spans after %d requests", sent)
		}
		// The trace-generation boilerplate, from the reader's machine.
		if out, code := p.outside("bash", "-c", `for i in $(seq 1 100); do curl -s -o /dev/null "http://`+url+`/productpage"; done`); code != 0 {
			t.Fatalf("100 requests to the product page: exit %d\n%s", code, out)
		}
		sent += 100
		// The proxies report every 5 s (or every 5 spans).
		for wait := time.Now().Add(12 * time.Second); trace == nil && time.Now().Before(wait); time.Sleep(time.Second) {
			trace = joinedTrace(t, zipkin)
		}
		p.step("sent " + strconv.Itoa(sent) + " requests")
	}
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
		if seen["istio-ingressgateway.istio-system"] && seen["productpage.default"] && seen["details.default"] && seen["reviews.default"] {
			return tr
		}
	}
	return nil
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
