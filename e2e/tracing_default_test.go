package e2e

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestProxyConfigAnnotationZipkinTracer is a pod's own proxy config: Istio installed
// without tracing, the Zipkin addon and Bookinfo behind its gateway, then productpage's
// template annotated proxy.istio.io/config with a tracing of its own (sampling 100, the
// addon's zipkin address, a literal custom tag). Its new pod's agent writes the
// bootstrap tracer from the annotation and its HCMs get the annotation's sampling and
// tag, so Zipkin gets the product page's spans, tagged; the other proxies have no
// tracer (the mesh's defaultConfig names none) and report nothing.
func TestProxyConfigAnnotationZipkinTracer(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	if out := p.sh(`istioctl install --skip-confirmation`); !strings.Contains(out, "Installation complete") {
		t.Fatalf("istioctl install:\n%s", out)
	}
	if out := p.sh(`kubectl apply -f samples/addons/extras/zipkin.yaml`); !strings.Contains(out, "service/zipkin created") {
		t.Errorf("apply the zipkin addon:\n%s", out)
	}
	url := p.bookinfoDeployed()
	p.sh(`kubectl patch deployment productpage-v1 --type merge -p '{"spec": {"template": {"metadata": {"annotations": {"proxy.istio.io/config": "tracing:\n  sampling: 100\n  zipkin: {address: zipkin.istio-system:9411}\n  customTags:\n    annotated: {literal: {value: \"yes\"}}\n"}}}}}'
kubectl rollout status deployment/productpage-v1`)
	p.step("productpage-v1 annotated with its own tracing and rolled out")
	zipkin := p.addonDashboard("zipkin", `^http://localhost:\d+\n$`)
	var spans []tracedSpan
	deadline := time.Now().Add(3 * time.Minute)
	for spans == nil {
		if time.Now().After(deadline) {
			t.Fatal("no span of productpage.default in Zipkin after 3 minutes of requests")
		}
		if out, code := p.outside("bash", "-c", `for i in $(seq 1 20); do curl -s -o /dev/null "http://`+url+`/productpage"; done`); code != 0 {
			t.Fatalf("20 requests to the product page: exit %d\n%s", code, out)
		}
		time.Sleep(6 * time.Second) // the tracer reports every 5 s
		body, err := getBody(zipkin + "/zipkin/api/v2/traces?serviceName=productpage.default&limit=10")
		if err != nil {
			continue
		}
		var traces [][]tracedSpan
		if err := json.Unmarshal([]byte(body), &traces); err != nil {
			t.Fatalf("Zipkin's traces of productpage.default: %v\n%.2000s", err, body)
		}
		for _, tr := range traces {
			spans = append(spans, tr...)
		}
	}
	server := false
	for _, s := range spans {
		t.Logf("span %s parent %-16s %-6s %-34s %s", s.ID, s.ParentID, s.Kind, s.LocalEndpoint.ServiceName, s.Name)
		if s.LocalEndpoint.ServiceName != "productpage.default" {
			t.Errorf("a span of %s: only productpage's proxy has a tracer", s.LocalEndpoint.ServiceName)
			continue
		}
		if s.Tags["annotated"] != "yes" || s.Tags["istio.canonical_service"] != "productpage" {
			t.Errorf("span %s (%s %s) tags %v: want the annotation's annotated=yes and Istio's", s.ID, s.Kind, s.Name, s.Tags)
		}
		server = server || s.Kind == "SERVER"
	}
	if !server {
		t.Error("no server span of the product page")
	}
	p.step("Zipkin has " + strconv.Itoa(len(spans)) + " spans, all the product page's, with the annotation's tag")
}

// TestWaypointLegacyZipkinTracer is the legacy MeshConfig tracing on a waypoint, as
// istiod gives a waypoint's main_internal connection managers the block and the request
// id extension: a mesh with defaultConfig.tracing's zipkin address and sampling 100,
// Bookinfo and curl in the ambient default namespace, the Zipkin addon, then `waypoint
// apply --enroll-namespace --wait`. curl's requests to the product page cross the
// waypoint, whose bootstrap tracer reports spans of service waypoint.default with the
// waypoint pod's Istio tags (canonical service waypoint) to Zipkin.
func TestWaypointLegacyZipkinTracer(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, ambientClusterYAML+`---
apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  enableTracing: true
  defaultConfig:
    tracing:
      sampling: 100
      zipkin: {address: zipkin.istio-system:9411}
`)
	run, poll, step := tl.run, tl.poll, tl.step
	run("apply", "-f", filepath.Join(filepath.Dir(samples), "samples/addons/extras/zipkin.yaml"))
	run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	run("apply", "-f", filepath.Join(samples, "curl/curl.yaml"))
	run("label", "namespace", "default", "istio.io/dataplane-mode=ambient")
	const page = "http://productpage:9080/productpage"
	title := "<title>Simple Bookstore App</title>"
	poll("productpage's page", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-sS", "--max-time", "10", page)
	run("waypoint", "apply", "--enroll-namespace", "--wait")
	step("waypoint ready")
	var spans []tracedSpan
	deadline := time.Now().Add(3 * time.Minute)
	for spans == nil {
		if time.Now().After(deadline) {
			t.Fatal("no span of waypoint.default in Zipkin after 3 minutes of requests")
		}
		run("exec", "deploy/curl", "--", "sh", "-c", `for i in $(seq 1 10); do curl -s -o /dev/null --max-time 10 `+page+`; done`)
		time.Sleep(6 * time.Second) // the tracer reports every 5 s
		out, _ := meshlab(t, "--lab", tl.name, "exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10",
			"http://zipkin.istio-system:9411/api/v2/traces?serviceName=waypoint.default&limit=5")
		var traces [][]tracedSpan
		if json.Unmarshal([]byte(out), &traces) != nil {
			continue
		}
		for _, tr := range traces {
			spans = append(spans, tr...)
		}
	}
	for _, s := range spans {
		t.Logf("span %s parent %-16s %-6s %-34s %s", s.ID, s.ParentID, s.Kind, s.LocalEndpoint.ServiceName, s.Name)
		if s.LocalEndpoint.ServiceName != "waypoint.default" {
			t.Errorf("a span of %s: only the waypoint has a proxy (and a tracer) here", s.LocalEndpoint.ServiceName)
			continue
		}
		if s.Tags["istio.canonical_service"] != "waypoint" || s.Tags["istio.namespace"] != "default" {
			t.Errorf("span %s (%s %s) tags %v: want the waypoint pod's Istio tags", s.ID, s.Kind, s.Name, s.Tags)
		}
	}
	step("Zipkin has " + strconv.Itoa(len(spans)) + " spans of the waypoint")
}
