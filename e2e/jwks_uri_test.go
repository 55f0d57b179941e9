package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// samplesURL is where Istio's JWT tasks take their key set and tokens; the lab's outside
// world answers it (demoapp/jwtsamples.go).
const samplesURL = "https://raw.githubusercontent.com/istio/istio/release-1.28/security/tools/jwt/samples/"

// TestJWTTaskWithJwksUri runs Istio's "authorization with JWT" task as written: the
// RequestAuthentication names the sample's jwksUri, which the control plane fetches from
// inside the lab (as istiod inlines it), and the tokens come from `curl` in the curl pod,
// as TOKEN=$(curl .../demo.jwt -s). A jwksUri the lab cannot fetch fails closed.
func TestJWTTaskWithJwksUri(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, writeTemp(t, "samples.yaml", jwtSamples))
	apply := func(name, body string) {
		t.Helper()
		if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", writeTemp(t, name, body)); err != nil {
			t.Fatalf("apply %s: %v\n%s", name, err, out)
		}
	}
	curl := func(args ...string) string {
		t.Helper()
		full := append([]string{"exec", "--name", l.name, "deploy/curl", "--", "curl", "-sS", "--max-time", "5"}, args...)
		out, err := meshlab(t, full...)
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return out
	}
	demo := strings.TrimSpace(curl(samplesURL + "demo.jwt"))
	groups := strings.TrimSpace(curl(samplesURL + "groups-scope.jwt"))
	if strings.Count(demo, ".") != 2 || strings.Count(groups, ".") != 2 {
		t.Fatalf("the sample tokens are not JWTs: %q %q", demo, groups)
	}
	code := func(token string) string {
		t.Helper()
		args := []string{"-o", "/dev/null", "-w", "%{http_code}", "http://httpbin.foo:8000/headers"}
		if token != "" {
			args = append(args, "-H", "Authorization: Bearer "+token)
		}
		return strings.TrimSpace(curl(args...))
	}
	expect := func(what, token, want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := code(token)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: got %s, want %s", what, got, want)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}

	apply("ra.yaml", `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt-example, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "`+samplesURL+`jwks.json"
`)
	expect("invalid token", "invalidToken", "401")
	expect("the sample's demo.jwt", demo, "200")
	apply("policy.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: ALLOW
  rules:
  - from:
    - source: {requestPrincipals: ["testing@secure.istio.io/testing@secure.istio.io"]}
    when:
    - {key: "request.auth.claims[groups]", values: ["group1"]}
`)
	expect("no token", "", "403")
	expect("demo.jwt has no groups", demo, "403")
	expect("groups-scope.jwt is in group1", groups, "200")

	// A key set the lab cannot fetch: every token of that issuer is refused, as istiod's
	// fallback key refuses them.
	apply("ra.yaml", `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt-example, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "https://raw.githubusercontent.com/istio/istio/release-1.28/no/such/jwks.json"
`)
	expect("an unfetchable jwksUri", groups, "401")
}
