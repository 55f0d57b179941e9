package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestAuthzDryRunTask walks "Dry Run" (tasks/security/authorization/authz-dry-run) as its
// snips.sh writes it, kubectl and istioctl changed to meshlab: httpbin and sleep in foo
// (namespace labelled for injection), Prometheus from samples/addons, the rbac logger at
// debug through proxy-config log, then the page's deny-path-headers policy with
// istio.io/dry-run "true" (applied, then annotated again as the page does): its 20 curls
// of /headers all get 200, the sidecar's log (kubectl logs -c istio-proxy | grep "shadow
// denied") has Envoy's line for each, and the proxy's stats and the Prometheus addon hold
// the shadow denials under Istio's authz_dry_run_action/authz_dry_run_result tags. What
// the page shows and the lab does not have: the metric's name (today's Istio names it
// envoy_http_rbac with the HCM prefix as a tag, not the page's 2021
// envoy_http_inbound_0_0_0_0_80_rbac) and the Zipkin span tags (the lab's proxies export
// no spans). Then, as the page's summary says, removing the annotation enforces the
// policy (403), and the page's clean up.
func TestAuthzDryRunTask(t *testing.T) {
	testutil.RequireRoot(t)
	requirePrometheus(t)
	t.Parallel()
	p := startPageLab(t)
	// Before you begin: Prometheus (the Querying Metrics task's addon), the workloads.
	if out := p.sh(`kubectl apply -f samples/addons/prometheus.yaml`); !strings.Contains(out, "deployment.apps/prometheus created\n") {
		t.Errorf("apply samples/addons/prometheus.yaml:\n%s", out)
	}
	p.sh(`kubectl create ns foo
kubectl label ns foo istio-injection=enabled
kubectl apply -f samples/httpbin/httpbin.yaml -n foo
kubectl apply -f samples/sleep/sleep.yaml -n foo`)
	p.step("httpbin and sleep applied in foo")
	// The page prints "rbac: debug": istioctl prints Envoy's "active loggers:" list,
	// indented by two spaces.
	p.shows("  rbac: debug\n", `istioctl proxy-config log deploy/httpbin.foo --level "rbac:debug" | grep rbac`)
	p.shows("200\n", sleepExec("foo")+` curl http://httpbin.foo:8000/ip -s -o /dev/null -w "%{http_code}\n"`)
	p.step("rbac at debug, sleep reaches httpbin")

	// Create dry-run policy.
	out := p.sh(`kubectl apply -n foo -f - <<EOF
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-path-headers
  annotations:
    "istio.io/dry-run": "true"
spec:
  selector:
    matchLabels:
      app: httpbin
  action: DENY
  rules:
  - to:
    - operation:
        paths: ["/headers"]
EOF`)
	if out != "authorizationpolicy.security.istio.io/deny-path-headers created\n" {
		t.Errorf("apply the dry-run policy: %q", out)
	}
	if out := p.sh(`kubectl annotate --overwrite authorizationpolicies deny-path-headers -n foo istio.io/dry-run='true'`); out != "authorizationpolicy.security.istio.io/deny-path-headers annotated\n" {
		t.Errorf("kubectl annotate --overwrite ... istio.io/dry-run='true': %q", out)
	}
	// The policy reaches the proxy as shadow rules: wait for the first shadow denial,
	// which the 20 requests then follow (each would get 200 with or without the policy in
	// place, so the log is what tells it arrived).
	httpbin := `"$(kubectl -n foo -l app=httpbin get pods -o jsonpath={.items..metadata.name})"`
	headers := sleepExec("foo") + ` curl http://httpbin.foo:8000/headers -H "X-B3-Sampled: 1" -s -o /dev/null -w "%{http_code}\n"`
	logs := `kubectl logs ` + httpbin + ` -c istio-proxy -n foo | grep "shadow denied"`
	p.until("a shadow denial in httpbin's proxy log", func() string {
		out, _ := p.command(headers + "\n" + logs).CombinedOutput()
		return string(out)
	}, func(out string) bool {
		return strings.Contains(out, "shadow denied, matched policy ns[foo]-policy[deny-path-headers]-rule[0]")
	})
	before := len(shadowLines(t, p.sh(logs)))
	p.step("the dry-run policy is in httpbin's proxy")

	if out := p.sh(`for i in {1..20}; do ` + headers + `; done`); out != strings.Repeat("200\n", 20) {
		t.Fatalf("20 requests to /headers under the dry-run DENY:\n%s\nwant 200 each (the policy is not enforced)", out)
	}
	// Check dry-run result in proxy log: one line per request, as Envoy's rbac logger
	// writes it.
	lines := shadowLines(t, p.sh(logs))
	if len(lines)-before != 20 {
		t.Errorf("%d shadow denied lines for 20 requests (%d before):\n%s", len(lines)-before, before, strings.Join(lines, "\n"))
	}
	p.step("20 × 200, 20 shadow denied lines")

	// The proxy's count, as Prometheus scrapes it (Istio's stats tags on the shadow stat).
	pod := strings.TrimSpace(p.sh(`kubectl -n foo -l app=httpbin get pods -o jsonpath={.items..metadata.name}`))
	es := p.sh(`istioctl x es ` + pod + `.foo -oprom`)
	shadow := regexp.MustCompile(`(?m)^envoy_http_rbac\{envoy_http_conn_manager_prefix="inbound_0\.0\.0\.0_8080",authz_dry_run_action="deny",authz_dry_run_result="denied"\} (\d+)$`).FindStringSubmatch(es)
	if shadow == nil {
		t.Fatalf("x es %s -oprom has no shadow denied count:\n%s", pod, grepLines(es, "rbac"))
	}
	if shadow[1] != strconv.Itoa(len(lines)) {
		t.Errorf("shadow denied count %s, want %d (one per logged line)", shadow[1], len(lines))
	}
	if !strings.Contains(es, `envoy_http_rbac{envoy_http_conn_manager_prefix="inbound_0.0.0.0_8080",authz_dry_run_action="deny",authz_dry_run_result="allowed"} `) {
		t.Errorf("no shadow allowed series (the requests to /ip):\n%s", grepLines(es, "rbac"))
	}
	// Envoy creates the enforced counters with the filter; with no enforced rules they
	// stay 0.
	for _, result := range []string{"allowed", "denied"} {
		if !strings.Contains(es, `envoy_http_rbac{envoy_http_conn_manager_prefix="inbound_0.0.0.0_8080",authz_enforce_result="`+result+`"} 0`+"\n") {
			t.Errorf("enforced %s is not 0 though only a dry-run policy applies:\n%s", result, grepLines(es, "rbac"))
		}
	}
	// Check dry-run result in metric using Prometheus: the addon's kubernetes-pods job
	// scrapes it from the sidecar's merged metrics.
	url := dashboardPrometheus(t, p.name)
	n := pollPromQL(t, url, `envoy_http_rbac{authz_dry_run_result!=""}`, func(m map[string]string) bool {
		return m["app"] == "httpbin" && m["namespace"] == "foo" && m["authz_dry_run_action"] == "deny" && m["authz_dry_run_result"] == "denied"
	}, 60*time.Second)
	p.step(strconv.Itoa(n) + " dry-run series in Prometheus")

	// Summary: without the annotation the policy is enforced.
	if out := p.sh(`kubectl annotate authorizationpolicies deny-path-headers -n foo istio.io/dry-run-`); out != "authorizationpolicy.security.istio.io/deny-path-headers annotated\n" {
		t.Errorf("remove the annotation: %q", out)
	}
	p.shows("403\n", headers)
	p.shows("200\n", sleepExec("foo")+` curl http://httpbin.foo:8000/ip -s -o /dev/null -w "%{http_code}\n"`)
	p.step("annotation removed: /headers 403, /ip 200")

	if out := p.sh(`kubectl delete namespace foo`); out != "namespace \"foo\" deleted\n" {
		t.Errorf("kubectl delete namespace foo: %q", out)
	}
}

// shadowLines returns the proxy log lines of the page's grep, each checked to be Envoy's
// rbac debug line for the page's policy.
func shadowLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		if !strings.Contains(l, "[debug][rbac] shadow denied, matched policy ns[foo]-policy[deny-path-headers]-rule[0]") {
			t.Errorf("proxy log line %q is not the rbac logger's shadow denied line for deny-path-headers", l)
		}
		lines = append(lines, l)
	}
	return lines
}

// TestAuthzDryRunOnIngressGateway: the dry-run page's policy selecting the ingress
// gateway instead of httpbin (what its authz-ingress sibling selects): the gateway, as
// istiod builds it, carries the AuthorizationPolicies that select its pods, so a request
// from outside the cluster through httpbin-gateway.yaml passes the dry-run DENY (200)
// and the gateway's rbac debug log has the shadow denied line; without the annotation
// the gateway answers 403 "RBAC: access denied" itself.
func TestAuthzDryRunOnIngressGateway(t *testing.T) {
	testutil.RequireRoot(t)
	requireHostTool(t, "curl")
	t.Parallel()
	p := startPageLab(t)
	p.sh(`istioctl install -y
kubectl create ns foo
kubectl label ns foo istio-injection=enabled
kubectl apply -f samples/httpbin/httpbin.yaml -n foo
kubectl apply -f samples/httpbin/httpbin-gateway.yaml -n foo`)
	host := strings.TrimSpace(p.sh(`kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}'`))
	url := "http://" + host + ":80"
	status := func(path string) func() string {
		return func() string {
			out, _ := p.outside("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}\n", url+path)
			return out
		}
	}
	is := func(want string) func(string) bool { return func(out string) bool { return out == want } }
	p.until("200 through the ingress gateway", status("/headers"), is("200\n"))
	p.shows("  rbac: debug\n", `istioctl proxy-config log deploy/istio-ingressgateway.istio-system --level "rbac:debug" | grep rbac`)
	p.step("httpbin through the ingress gateway, its rbac logger at debug")

	p.sh(`kubectl apply -n istio-system -f - <<EOF
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-path-headers
  annotations:
    "istio.io/dry-run": "true"
spec:
  selector:
    matchLabels:
      istio: ingressgateway
  action: DENY
  rules:
  - to:
    - operation:
        paths: ["/headers"]
EOF`)
	gwLogs := `kubectl logs "$(kubectl -n istio-system -l istio=ingressgateway get pods -o jsonpath={.items..metadata.name})" -n istio-system | grep "shadow denied"`
	p.until("a shadow denied line in the gateway's log", func() string {
		status("/headers")()
		out, _ := p.command(gwLogs).CombinedOutput()
		return string(out)
	}, func(out string) bool {
		return strings.Contains(out, "[debug][rbac] shadow denied, matched policy ns[istio-system]-policy[deny-path-headers]-rule[0]")
	})
	if got := status("/headers")(); got != "200\n" {
		t.Errorf("/headers under the gateway's dry-run DENY: %q, want 200", got)
	}
	p.step("dry-run on the gateway: 200, shadow denied logged")

	p.sh(`kubectl annotate authorizationpolicies deny-path-headers -n istio-system istio.io/dry-run-`)
	p.until("403 from the gateway", status("/headers"), is("403\n"))
	if out, _ := p.outside("curl", "-s", url+"/headers"); out != "RBAC: access denied" {
		t.Errorf("/headers body %q, want the gateway's RBAC: access denied", out)
	}
	p.until("200 for /ip", status("/ip"), is("200\n"))
	p.step("enforced on the gateway: /headers 403, /ip 200")
}
