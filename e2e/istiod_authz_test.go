package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestIstiodAuthorization runs the authorization tasks' policies on istiod, in the foo
// namespace of "Explicit deny" (httpbin, and curl with its own service account):
// allow-nothing makes httpbin answer 403 "RBAC: access denied"; an ALLOW of GET for
// curl's mTLS identity (principal cluster.local/ns/foo/sa/curl) lets GET through and
// leaves POST denied; a DENY of GET unless x-token is admin then wins over that ALLOW.
// Each step is istiod's RBAC filters, pushed as istiod pushes them, enforced by
// httpbin's sidecar.
func TestIstiodAuthorization(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	begin := time.Now()
	l := startLabWithin(t, 3*time.Minute, "testdata/tasks/authz-foo.yaml", "--control-plane=istiod", "--istiod-path", bin)
	upTook := time.Since(begin)
	// answer is httpbin's answer to curl's request: "<status>" and, when denied,
	// " RBAC: access denied" (the body Envoy's RBAC filter writes).
	answer := func(method, path, token string) func() string {
		return func() string {
			args := []string{"curl", "-sS", "--max-time", "10", "-X", method, "-w", "\n%{http_code}", "http://httpbin.foo:8000" + path}
			if token != "" {
				args = append(args, "-H", "x-token: "+token)
			}
			out, _ := execIn(t, l.name, []string{"-n", "foo"}, "deploy/curl", args...)
			out = strings.TrimSpace(out)
			code := out[strings.LastIndexByte(out, '\n')+1:]
			if strings.HasPrefix(out, "RBAC: access denied\n") {
				return code + " RBAC: access denied"
			}
			return code
		}
	}
	policy := func(name, spec string) string {
		return fmt.Sprintf("apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: %s, namespace: foo}\nspec: %s\n", name, spec)
	}
	// A loaded machine: istiod's debounce, its push and the sidecar's apply all take
	// their time; every expectation is polled.
	expect := func(what string, got func() string, want string) {
		t.Helper()
		within(t, what+": "+want, got, func(s string) bool { return s == want })
	}
	expect("before any policy, GET /get", answer("GET", "/get", ""), "200")

	applyYAML(t, l.name, policy("allow-nothing", "{}"))
	expect("allow-nothing, GET /get", answer("GET", "/get", ""), "403 RBAC: access denied")

	applyYAML(t, l.name, policy("curl-may-get", `{selector: {matchLabels: {app: httpbin}}, action: ALLOW,
  rules: [{from: [{source: {principals: ["cluster.local/ns/foo/sa/curl"]}}], to: [{operation: {methods: ["GET"]}}]}]}`))
	expect("GET allowed for curl's identity, GET /get", answer("GET", "/get", ""), "200")
	expect("GET allowed for curl's identity, POST /post", answer("POST", "/post", ""), "403 RBAC: access denied")

	applyYAML(t, l.name, policy("deny-get-unless-admin", `{selector: {matchLabels: {app: httpbin}}, action: DENY,
  rules: [{to: [{operation: {methods: ["GET"]}}], when: [{key: "request.headers[x-token]", notValues: ["admin"]}]}]}`))
	expect("DENY before ALLOW, GET /get as guest", answer("GET", "/get", "guest"), "403 RBAC: access denied")
	expect("DENY before ALLOW, GET /get as admin", answer("GET", "/get", "admin"), "200")

	t.Logf("up on istiod took %.1fs, the policies' steps %.1fs", upTook.Seconds(), time.Since(begin.Add(upTook)).Seconds())
	// The policies as istiod made them: httpbin's inbound RBAC filter names them by
	// istiod's policy ids (ns[foo]-policy[...]-rule[0]).
	out, err := meshlab(t, "x", "internal-debug", "--name", l.name, "config_dump?proxyID="+podOf(t, l.name, "foo", "httpbin-").Name+".foo")
	if err != nil || !containsAll(out, "ns[foo]-policy[curl-may-get]-rule[0]", "ns[foo]-policy[deny-get-unless-admin]-rule[0]") {
		t.Errorf("istiod's config_dump of httpbin: %v; want its RBAC policies named by istiod\n%.1500s", err, out)
	}
}
