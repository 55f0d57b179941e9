package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// The manifests of istio.io's ambient "Egress gateways" page (ambient/usage/
// egress-gateway), as the page writes them.
const (
	egressHTTPBinEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: httpbin-org
  namespace: istio-egress
spec:
  hosts:
  - httpbin.org
  ports:
  - number: 80
    name: http
    protocol: HTTP
  resolution: DNS
`
	egressHTTPBinPolicy = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: httpbin-org
  namespace: istio-egress
spec:
  targetRefs:
  - kind: ServiceEntry
    group: networking.istio.io
    name: httpbin-org
  action: ALLOW
  rules:
  - to:
    - operation:
        methods: ["GET"]
        paths: ["/get"]
`
	egressTLSOrigination = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: httpbin-org
  namespace: istio-egress
spec:
  hosts:
  - httpbin.org
  ports:
  - number: 80
    name: http
    protocol: HTTP
    targetPort: 443
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: httpbin-org-tls
  namespace: istio-egress
spec:
  host: httpbin.org
  trafficPolicy:
    tls:
      mode: SIMPLE
`
	egressExampleEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: example-com
  namespace: istio-egress
spec:
  hosts:
  - example.com
  ports:
  - number: 80
    name: http
    protocol: HTTP
  resolution: DNS
`
)

// collapse is s with each run of spaces one space: the page's column widths are its
// own (_verify_like).
func collapse(s string) string {
	return regexp.MustCompile(` +`).ReplaceAllString(strings.TrimSpace(s), " ")
}

// TestDocsAmbientEgressGatewayPage walks istio.io's ambient "Egress gateways" page
// (ambient/usage/egress-gateway) in a lab whose default namespace is declared without
// labels, each command changed only from kubectl/istioctl to meshlab, the outside world
// the lab's own (httpbin.org and example.com on private addresses, lab/world.go),
// outputs compared with the page's: curl from Istio's samples into the ambient mesh, the
// istio-egress namespace and its waypoint for services (`waypoint apply --for service
// --enroll-namespace`, `waypoint list`), the ServiceEntry for httpbin.org with
// resolution DNS (the host gets an autoallocated 240.240.0.0/16 address, which ztunnel's
// DNS proxy answers and sends to the waypoint): 200, counted by the waypoint's cluster
// inbound-vip|80|http|httpbin.org (`pilot-agent request GET stats | grep
// upstream_rq_total`); the AuthorizationPolicy targeting the ServiceEntry (GET /get 200,
// POST /post 403); TLS origination at the waypoint (targetPort 443 and a SIMPLE
// DestinationRule: httpbin.org sees https); a second ServiceEntry for example.com (200);
// the page's clean-up.
func TestDocsAmbientEgressGatewayPage(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, ambientClusterYAML)
	l, run, poll, step := tl.runningLab, tl.run, tl.poll, tl.step

	// The page's boilerplate: the Gateway API CRDs are there, so nothing is installed.
	if out := run("get", "crd", "gateways.gateway.networking.k8s.io"); !strings.Contains(out, "gateways.gateway.networking.k8s.io") {
		t.Errorf("get crd gateways.gateway.networking.k8s.io:\n%s", out)
	}
	// snip_deploy_curl, snip_label_default_ambient, snip_create_egress_ns.
	run("apply", "-f", filepath.Join(samples, "curl/curl.yaml"))
	if out := run("label", "namespace", "default", "istio.io/dataplane-mode=ambient"); out != "namespace/default labeled\n" {
		t.Errorf("label namespace default: %q", out)
	}
	if out := run("create", "namespace", "istio-egress"); out != "namespace/istio-egress created\n" {
		t.Errorf("create namespace istio-egress: %q", out)
	}
	run("label", "namespace", "istio-egress", "istio.io/dataplane-mode=ambient")

	// snip_apply_egress_waypoint, snip_wait_egress_waypoint.
	const applied = "✅ waypoint istio-egress/waypoint applied\n✅ namespace istio-egress labeled with \"istio.io/use-waypoint: waypoint\"\n"
	if out := run("waypoint", "apply", "--for", "service", "--enroll-namespace", "--namespace", "istio-egress"); out != applied {
		t.Errorf("waypoint apply --for service --enroll-namespace:\n%s\nwant the page's\n%s", out, applied)
	}
	const listed = "NAME REVISION TRAFFIC TYPE PROGRAMMED\nwaypoint default service True"
	poll("the page's waypoint list", func(out string) bool { return collapse(out) == listed }, "waypoint", "list", "-n", "istio-egress")
	step("the egress waypoint")

	// snip_apply_serviceentry, snip_verify_egress_traffic, snip_check_waypoint_logs.
	applyYAML(t, l.name, egressHTTPBinEntry)
	code := func(args ...string) []string {
		return append([]string{"exec", "deploy/curl", "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"}, args...)
	}
	poll("httpbin.org through the egress waypoint: 200", func(out string) bool { return out == "200" }, code("http://httpbin.org/get")...)
	stats := run("exec", "-n", "istio-egress", "deploy/waypoint", "-c", "istio-proxy", "--", "pilot-agent", "request", "GET", "stats")
	if !regexp.MustCompile(`(?m)^cluster\.inbound-vip\|80\|http\|httpbin\.org;\.upstream_rq_total: [1-9]`).MatchString(grepLines(stats, "upstream_rq_total")) {
		t.Errorf("the waypoint's upstream_rq_total:\n%s\nwant inbound-vip|80|http|httpbin.org counting the request", grepLines(stats, "upstream_rq_total"))
	}
	if out := run("ztunnel-config", "services"); !regexp.MustCompile(`(?m)^istio-egress\s+httpbin-org\s+240\.240\.\d+\.\d+\s+waypoint\s`).MatchString(out) {
		t.Errorf("ztunnel-config services:\n%s\nwant httpbin-org on an autoallocated address, through the waypoint", out)
	}
	step("httpbin.org through the egress waypoint")

	// snip_apply_authz_policy, snip_verify_allowed_request, snip_verify_denied_request.
	applyYAML(t, l.name, egressHTTPBinPolicy)
	poll("POST /post denied by the waypoint: 403", func(out string) bool { return out == "403" }, code("-X", "POST", "http://httpbin.org/post")...)
	if out := run(code("http://httpbin.org/get")...); out != "200" {
		t.Errorf("GET /get with the policy: %q, want the page's 200", out)
	}
	step("the ServiceEntry's policy at the waypoint")

	// snip_apply_tls_origination, snip_verify_tls_origination (httpbin's answer, whose
	// url says how the waypoint reached it).
	applyYAML(t, l.name, egressTLSOrigination)
	out := poll("httpbin.org reached over TLS from the waypoint", func(out string) bool { return strings.Contains(out, `"url": "https://httpbin.org/get"`) },
		"exec", "deploy/curl", "--", "curl", "-s", "http://httpbin.org/get")
	if !strings.HasPrefix(out, "{\n  \"args\": {}, \n  \"headers\": {") && !strings.HasPrefix(out, "{\n  \"args\": {},\n  \"headers\": {") {
		t.Errorf("curl http://httpbin.org/get | head -5:\n%s\nwant httpbin's JSON", out)
	}
	step("TLS origination at the waypoint")

	// snip_apply_second_serviceentry, snip_verify_second_serviceentry.
	applyYAML(t, l.name, egressExampleEntry)
	poll("example.com through the egress waypoint: 200", func(out string) bool { return out == "200" }, code("http://example.com")...)

	// snip_cleanup.
	if out := run("delete", "namespace", "istio-egress"); out != "namespace \"istio-egress\" deleted\n" {
		t.Errorf("delete namespace istio-egress: %q", out)
	}
	run("delete", "-f", filepath.Join(samples, "curl/curl.yaml"))
	if out := run("label", "namespace", "default", "istio.io/dataplane-mode-"); out != "namespace/default unlabeled\n" {
		t.Errorf("label namespace default istio.io/dataplane-mode-: %q", out)
	}
	if out := run("ztunnel-config", "services"); strings.Contains(out, "httpbin") {
		t.Errorf("ztunnel-config services after the clean-up:\n%s", out)
	}
}
