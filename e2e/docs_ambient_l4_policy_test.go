package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// The policies of istio.io's ambient "Use Layer 4 security policy" page (ambient/usage/
// l4-policy) as it writes them, but for the heredoc's EOF the page leaves inside each YAML
// block (kubectl would refuse it as YAML).
const (
	l4AllowSleep = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
 name: allow-sleep-to-httpbin
spec:
 selector:
   matchLabels:
     app: httpbin
 action: ALLOW
 rules:
 - from:
   - source:
       principals:
       - cluster.local/ns/ambient-demo/sa/sleep
`
	l7AllowSleepGET = `apiVersion: security.istio.io/v1beta1
kind: AuthorizationPolicy
metadata:
 name: allow-sleep-to-httpbin
spec:
 selector:
   matchLabels:
     app: httpbin
 action: ALLOW
 rules:
 - from:
   - source:
       principals:
       - cluster.local/ns/ambient-demo/sa/sleep
   to:
   - operation:
       methods: ["GET"]
`
)

// TestDocsAmbientL4PolicyPage walks istio.io's ambient L4 policy page on Istio's httpbin,
// sleep and curl samples in namespace ambient-demo (ambient): its L4 policy lets sleep's
// identity reach httpbin and resets curl's connection; its L7 variant, with no waypoint,
// makes ztunnel reset sleep's too (the page's "command terminated with exit code 56"); the
// page's `label namespace ... istio.io/dataplane-mode-` takes the namespace out of ambient
// (kubectl's "unlabeled"), and sleep reaches httpbin without ztunnel.
func TestDocsAmbientL4PolicyPage(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, ambientClusterYAML+"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ambient-demo\n  labels:\n    istio.io/dataplane-mode: ambient\n")
	run, poll, step := tl.run, tl.poll, tl.step
	for _, f := range []string{"httpbin/httpbin.yaml", "sleep/sleep.yaml", "curl/curl.yaml"} {
		run("apply", "-n", "ambient-demo", "-f", filepath.Join(samples, f))
	}
	get := func(client string) []string {
		return []string{"exec", "-n", "ambient-demo", "deploy/" + client, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "http://httpbin:8000/get"}
	}
	ok := func(out string) bool { return out == "200" }
	reset := func(out string) bool { return strings.Contains(out, "command terminated with exit code 56") }
	poll("sleep reaches httpbin through ztunnel", ok, get("sleep")...)
	step("httpbin answers")

	if out := run("apply", "-n", "ambient-demo", "-f", writeTemp(t, "l4.yaml", l4AllowSleep)); !strings.Contains(out, "authorizationpolicy.security.istio.io/allow-sleep-to-httpbin created") {
		t.Errorf("apply the L4 policy: %q", out)
	}
	poll("curl's connection reset by httpbin's ztunnel", reset, get("curl")...)
	poll("sleep still allowed", ok, get("sleep")...)
	step("the L4 policy enforced")

	run("apply", "-n", "ambient-demo", "-f", writeTemp(t, "l7.yaml", l7AllowSleepGET))
	poll("sleep's connection reset: an L7 rule without a waypoint", reset, get("sleep")...)
	step("the L7 rule denied by ztunnel")

	if out := run("label", "namespace", "ambient-demo", "istio.io/dataplane-mode-"); out != "namespace/ambient-demo unlabeled\n" {
		t.Errorf("label namespace ambient-demo istio.io/dataplane-mode-: %q, want kubectl's namespace/ambient-demo unlabeled", out)
	}
	poll("sleep reaches httpbin outside ambient", ok, get("sleep")...)
}
