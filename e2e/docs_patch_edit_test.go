package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// meshlabSplit runs the binary with extra environment, returning stdout and stderr apart
// (kubectl's lines on one, its notes and errors on the other) and the error.
func meshlabSplit(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(meshlabBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestDocsPatchEditGet walks the kubectl patch, edit and multi-name get lines of Istio's
// kiali, authz-ingress, secure-metrics, ext-authz and agentgateway pages on a real lab:
// the kiali page's JSON patches rename details' port and back (stored, shown, a second
// run is "patched (no change)"), the authz-ingress page's strategic patch keeps
// externalTrafficPolicy Local on istioctl's ingress gateway Service (get and describe
// show it), the secure-metrics patches are applied as kubectl applies them and refused
// by the field meshlab cannot honour with nothing changed, edit of the istio ConfigMap
// changes the lab's mesh config and refuses the ext-authz page's extensionProviders by
// name, and get takes several names.
func TestDocsPatchEditGet(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	tl := startTaskLabFrom(t, "# a cluster before the task\n")
	samples := testutil.IstioSamples(t)
	run := func(want string, args ...string) {
		t.Helper()
		if out := tl.run(args...); out != want {
			t.Fatalf("meshlab %s:\n%s\nwant:\n%s", strings.Join(args, " "), out, want)
		}
	}
	fails := func(wantOut, wantErr string, args ...string) {
		t.Helper()
		out, errOut, err := meshlabSplit(t, nil, append([]string{"--lab", tl.name}, args...)...)
		if err == nil || out != wantOut || !strings.Contains(errOut, wantErr) {
			t.Fatalf("meshlab %s: %v\nstdout:\n%s\nstderr:\n%s\nwant exit 1, stdout %q and stderr saying %q", strings.Join(args, " "), err, out, errOut, wantOut, wantErr)
		}
	}
	tl.run("install", "--set", "profile=demo", "-y")
	tl.run("create", "ns", "bookinfo")
	tl.run("label", "ns", "bookinfo", "istio-injection=enabled")
	tl.run("apply", "-n", "bookinfo", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	tl.step("Bookinfo applied in bookinfo")

	// observability/kiali: the port renamed foo, then back to http, as the page writes it.
	portName := func() string {
		return tl.run("get", "svc", "details", "-n", "bookinfo", "-o", "jsonpath={.spec.ports[0].name}")
	}
	run("service/details patched\n", "patch", "service", "details", "-n", "bookinfo", "--type", "json", "-p", `[{"op":"replace","path":"/spec/ports/0/name", "value":"foo"}]`)
	if got := portName(); got != "foo" {
		t.Fatalf("details' port after the patch: %q, want foo", got)
	}
	run("service/details patched (no change)\n", "patch", "service", "details", "-n", "bookinfo", "--type", "json", "-p", `[{"op":"replace","path":"/spec/ports/0/name", "value":"foo"}]`)
	run("service/details patched\n", "patch", "service", "details", "-n", "bookinfo", "--type", "json", "-p", `[{"op":"replace","path":"/spec/ports/0/name", "value":"http"}]`)
	if got := portName(); got != "http" {
		t.Fatalf("details' port after the patch back: %q, want http", got)
	}
	fails("", "The request is invalid: the server rejected our request due to an error in our request",
		"patch", "service", "details", "-n", "bookinfo", "--type", "json", "-p", `[{"op":"replace","path":"/spec/ports/3/name", "value":"x"}]`)
	// A CRD's object takes merge and JSON patches, not strategic (no Go patch metadata).
	tl.run("apply", "-n", "bookinfo", "-f", filepath.Join(samples, "bookinfo/networking/virtual-service-all-v1.yaml"))
	fails("", "Error from server (UnsupportedMediaType): the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
		"patch", "vs", "reviews", "-n", "bookinfo", "-p", `{"metadata":{"labels":{"team":"docs"}}}`)
	run("virtualservice.networking.istio.io/reviews patched\n", "patch", "vs/reviews", "-n", "bookinfo", "--type", "merge", "-p", `{"metadata":{"labels":{"team":"docs"}}}`)
	run("docs", "get", "vs", "reviews", "-n", "bookinfo", "-o", "jsonpath={.metadata.labels.team}")
	tl.step("kiali's patches")

	// security/authorization/authz-ingress: the ingress gateway Service's policy, kept and shown.
	run("service/istio-ingressgateway patched\n", "patch", "svc", "istio-ingressgateway", "-n", "istio-system", "-p", `{"spec":{"externalTrafficPolicy":"Local"}}`)
	run("Local", "get", "svc", "istio-ingressgateway", "-n", "istio-system", "-o", "jsonpath={.spec.externalTrafficPolicy}")
	out, errOut, err := meshlabSplit(t, nil, "--lab", tl.name, "describe", "svc", "istio-ingressgateway", "-n", "istio-system")
	if err != nil || !strings.Contains(out, "External Traffic Policy:  Local\n") || !strings.Contains(errOut, "changes nothing in a lab") {
		t.Fatalf("describe svc istio-ingressgateway: %v\n%s\n%s\nwant the policy, and what it does in a lab on stderr", err, out, errOut)
	}
	run("service/istio-ingressgateway patched (no change)\n", "patch", "svc", "istio-ingressgateway", "-n", "istio-system", "-p", `{"spec":{"externalTrafficPolicy":"Local"}}`)
	fails("", "spec.selector.app: service/istio-ingressgateway in istio-system is made by the lab",
		"patch", "svc", "istio-ingressgateway", "-n", "istio-system", "--type", "merge", "-p", `{"spec":{"selector":{"app":"x"}}}`)
	// The page's Gateway API form: the Gateway's automated Service takes the same patch.
	gw := filepath.Join(t.TempDir(), "httpbin-gateway.yaml")
	if err := os.WriteFile(gw, []byte("apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: httpbin-gateway\nspec:\n  gatewayClassName: istio\n  listeners:\n  - name: http\n    port: 80\n    protocol: HTTP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tl.run("apply", "-n", "bookinfo", "-f", gw)
	run("service/httpbin-gateway-istio patched\n", "patch", "svc", "httpbin-gateway-istio", "-n", "bookinfo", "-p", `{"spec":{"externalTrafficPolicy":"Local"}}`)
	run("Local", "get", "svc", "httpbin-gateway-istio", "-n", "bookinfo", "-o", "jsonpath={.spec.externalTrafficPolicy}")
	// secure-metrics' Gateway API patch, on its Gateway istio-system/istio-ingressgateway
	// (beside istioctl's gateway of that name): spec.infrastructure.annotations are taken,
	// as Istio copies them onto the automated deployment's pod template (the listeners
	// they give are TestDocsSecureMetricsGateways').
	gwPatch := filepath.Join(t.TempDir(), "gateway-api-secure-metrics-patch.yaml")
	if err := os.WriteFile(gw, []byte("apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: istio-ingressgateway\n  namespace: istio-system\nspec:\n  gatewayClassName: istio\n  listeners:\n  - name: http\n    port: 80\n    protocol: HTTP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gwPatch, []byte("spec:\n  infrastructure:\n    annotations:\n      proxy.istio.io/config: |\n        proxyMetadata:\n          ENVOY_SECURE_METRICS_PORT: \"15091\"\n          ENVOY_SECURE_MERGED_METRICS_PORT: \"15092\"\n      prometheus.istio.io/secure-port: \"15092\"\n      prometheus.io/path: \"/stats/prometheus\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := tl.run("apply", "-f", gw); !strings.HasPrefix(out, "gateway.gateway.networking.k8s.io/istio-ingressgateway created\n") {
		t.Fatalf("apply the page's Gateway istio-system/istio-ingressgateway:\n%s\nwant it created, beside istioctl's gateway", out)
	}
	run("gateway.gateway.networking.k8s.io/istio-ingressgateway patched\n", "patch", "gateway", "istio-ingressgateway", "-n", "istio-system", "--type=merge", "--patch-file="+gwPatch)
	run("15092", "get", "gateway", "istio-ingressgateway", "-n", "istio-system", "-o", `jsonpath={.spec.infrastructure.annotations.prometheus\.istio\.io/secure-port}`)
	tl.step("authz-ingress's patch")

	// observability/metrics/secure-metrics: the page's patch files, as it writes them.
	tl.run("label", "namespace", "default", "istio-injection=enabled", "--overwrite")
	tl.run("apply", "-f", filepath.Join(samples, "httpbin/httpbin.yaml"))
	dir := t.TempDir()
	httpbinPatch := filepath.Join(dir, "httpbin-secure-metrics-patch.yaml")
	gatewayPatch := filepath.Join(dir, "gateway-secure-metrics-patch.yaml")
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(httpbinPatch, `spec:
  template:
    metadata:
      annotations:
        proxy.istio.io/config: |
          proxyMetadata:
            ENVOY_SECURE_METRICS_PORT: "15091"
            ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
        prometheus.io/path: "/stats/prometheus"
`)
	write(gatewayPatch, `spec:
  template:
    metadata:
      annotations:
        prometheus.istio.io/secure-port: "15092"
        prometheus.io/path: "/stats/prometheus"
    spec:
      containers:
      - name: istio-proxy
        env:
        - name: ENVOY_SECURE_METRICS_PORT
          value: "15091"
        - name: ENVOY_SECURE_MERGED_METRICS_PORT
          value: "15092"
`)
	// The sidecar's secure metrics are served since the eleventh session
	// (TestDocsSecureMetricsTask walks the page): the patch is taken as kubectl takes it.
	if out := tl.run("patch", "deployment", "httpbin", "-n", "default", "--type=merge", "--patch-file="+httpbinPatch); out != "deployment.apps/httpbin patched\n" {
		t.Fatalf("secure-metrics' httpbin patch:\n%s\nwant kubectl's deployment.apps/httpbin patched", out)
	}
	if got := tl.run("get", "deployment", "httpbin", "-n", "default", "-o", "jsonpath={.spec.template.metadata.annotations.proxy\\.istio\\.io/config}"); !strings.Contains(got, `ENVOY_SECURE_METRICS_PORT: "15091"`) {
		t.Fatalf("httpbin's template after the patch carries proxy.istio.io/config %q, want the page's proxyMetadata", got)
	}
	// The gateway's patch is kept as the install's k8s settings of istioctl's gateway
	// (TestDocsSecureMetricsGateways has its listeners); what else a patch would change
	// of the Deployment the lab makes is refused by field.
	run("deployment.apps/istio-ingressgateway patched\n", "patch", "deployment", "istio-ingressgateway", "-n", "istio-system", "--type=strategic", "--patch-file="+gatewayPatch)
	run("deployment.apps/istio-ingressgateway patched (no change)\n", "patch", "deployment", "istio-ingressgateway", "-n", "istio-system", "--type=strategic", "--patch-file="+gatewayPatch)
	fails("", "spec.replicas: deployment.apps/istio-ingressgateway in istio-system is made by the lab, which keeps only the pod template's annotations and the istio-proxy container's env",
		"patch", "deployment", "istio-ingressgateway", "-n", "istio-system", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	tl.step("secure-metrics' patches")

	// security/authorization/authz-custom: kubectl edit configmap istio -n istio-system.
	editor := filepath.Join(dir, "editor.sh")
	write(editor, `#!/bin/sh
if grep -q "was not valid" "$1"; then cp "$1" "$1.reopened"; exit 0; fi
case "$EDIT_WHAT" in
log) sed -i 's|accessLogFile: .*|accessLogFile: /dev/null|' "$1" ;;
authz) sed -i 's|    defaultProviders:|    extensionProviders:\n    - name: sample-ext-authz-http\n      envoyExtAuthzHttp:\n        service: ext-authz.foo.svc.cluster.local\n        port: "8000"\n    defaultProviders:|' "$1" ;;
esac
`)
	if err := os.Chmod(editor, 0o755); err != nil {
		t.Fatal(err)
	}
	edit := func(what string) (string, string, error) {
		return meshlabSplit(t, []string{"KUBE_EDITOR=" + editor, "EDIT_WHAT=" + what, "TMPDIR=" + dir}, "--lab", tl.name, "edit", "configmap", "istio", "-n", "istio-system")
	}
	if out, errOut, err := edit("none"); err != nil || out != "" || errOut != "Edit cancelled, no changes made.\n" {
		t.Fatalf("edit saved unchanged: %v\n%s\n%s\nwant kubectl's cancel", err, out, errOut)
	}
	if out, errOut, err := edit("log"); err != nil || out != "configmap/istio edited\n" {
		t.Fatalf("edit of accessLogFile: %v\n%s\n%s", err, out, errOut)
	}
	if mesh := tl.run("get", "configmap", "istio", "-n", "istio-system", "-o", "jsonpath={.data.mesh}"); !strings.Contains(mesh, "accessLogFile: /dev/null\n") {
		t.Fatalf("the istio ConfigMap's mesh after the edit:\n%s\nwant accessLogFile /dev/null", mesh)
	}
	out, errOut, err = edit("authz")
	if err == nil || out != "" || !strings.Contains(errOut, "Edit cancelled, no valid changes were saved.") {
		t.Fatalf("edit adding extensionProviders: %v\n%s\n%s\nwant the save refused, then kubectl's cancel", err, out, errOut)
	}
	reopened, _ := filepath.Glob(filepath.Join(dir, "meshlab-edit-*.yaml.reopened"))
	if len(reopened) != 1 {
		t.Fatalf("the refused save was not reopened in the editor (%v)", reopened)
	}
	text, err := os.ReadFile(reopened[0])
	if err != nil || !strings.Contains(string(text), "# configmaps \"istio\" was not valid:\n# * data.mesh: extensionProviders: meshlab's mesh config does not honour it") {
		t.Fatalf("the reopened file:\n%s\nwant the reason at its head", text)
	}
	tl.step("edit configmap istio")

	// ambient/usage/agentgateway's form: get KIND NAME NAME, each missing name NotFound.
	out = tl.run("get", "svc", "details", "productpage", "-n", "bookinfo")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "details ") || !strings.HasPrefix(lines[2], "productpage ") {
		t.Fatalf("get svc details productpage:\n%s\nwant one table of the two, in the order named", out)
	}
	out, errOut, err = meshlabSplit(t, nil, "--lab", tl.name, "get", "svc/details", "svc/nope", "-n", "bookinfo")
	if err == nil || !strings.Contains(out, "\ndetails ") || errOut != `Error from server (NotFound): services "nope" not found`+"\n" {
		t.Fatalf("get svc/details svc/nope: %v\n%s\n%s\nwant details shown, nope's NotFound on stderr, exit 1", err, out, errOut)
	}
}

// TestDocsKialiPatchIstiod runs the kiali page's two patch lines on a lab whose control
// plane is Istio's istiod (bin/meshlab-istiod) and asserts what istiod makes of them:
// details' port named foo is no protocol istiod knows, so productpage's sidecar sniffs it
// (a listener on details' VIP with an HTTP chain and a TCP chain to its cluster, whose
// upstream protocol follows the client's); named http again, both are gone. meshlab's
// own generator sniffs such a port too (TestSniffedPorts, fidelity's sniffed-port).
func TestDocsKialiPatchIstiod(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, []byte("# a cluster before the task\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLabWithin(t, 3*time.Minute, "--control-plane=istiod", "--istiod-path", bin, file)
	ml := func(args ...string) string {
		t.Helper()
		return mustMeshlab(t, append([]string{"--lab", l.name}, args...)...)
	}
	samples := testutil.IstioSamples(t)
	ml("create", "ns", "bookinfo")
	ml("label", "ns", "bookinfo", "istio-injection=enabled")
	ml("apply", "-n", "bookinfo", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	ml("wait", "--for=condition=ready", "pod", "-l", "app=productpage", "-n", "bookinfo", "--timeout", "120s")
	pp := ml("get", "pods", "-n", "bookinfo", "-l", "app=productpage", "-o", "jsonpath={.items[0].metadata.name}")
	vip := ml("get", "svc", "details", "-n", "bookinfo", "-o", "jsonpath={.spec.clusterIP}")
	const cluster = "outbound|9080||details.bookinfo.svc.cluster.local"
	sniffed := func() (listener, upstream bool) {
		t.Helper()
		ls := ml("pc", "listeners", pp, "-n", "bookinfo", "--port", "9080")
		cs := ml("pc", "clusters", pp, "-n", "bookinfo", "--fqdn", "details.bookinfo.svc.cluster.local", "-o", "json")
		listener = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(vip) + `\s+9080\s+ALL\s+Cluster: ` + regexp.QuoteMeta(cluster) + `$`).MatchString(ls)
		return listener, strings.Contains(cs, "useDownstreamProtocolConfig")
	}
	waitFor := func(what string, want bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			l, u := sniffed()
			if l == want && u == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: listener on %s:9080 to %s: %v, upstream protocol from the client's: %v; want both %v", what, vip, cluster, l, u, want)
			}
			time.Sleep(time.Second)
		}
	}
	waitFor("details' port named http", false)
	if out := ml("patch", "service", "details", "-n", "bookinfo", "--type", "json", "-p", `[{"op":"replace","path":"/spec/ports/0/name", "value":"foo"}]`); out != "service/details patched\n" {
		t.Fatalf("patch to foo: %q", out)
	}
	waitFor("details' port named foo", true)
	if out := ml("exec", pp, "-n", "bookinfo", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://details:9080/details/0"); out != "200" {
		t.Fatalf("productpage to details with its port named foo: %q, want 200", out)
	}
	if out := ml("patch", "service", "details", "-n", "bookinfo", "--type", "json", "-p", `[{"op":"replace","path":"/spec/ports/0/name", "value":"http"}]`); out != "service/details patched\n" {
		t.Fatalf("patch back to http: %q", out)
	}
	waitFor("details' port named http again", false)
}
