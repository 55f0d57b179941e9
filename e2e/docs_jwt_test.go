package e2e

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// jwtSamplesBranchURL is {{< github_file >}}/security/tools/jwt/samples/ as the page
// expands it for today's release.
const jwtSamplesBranchURL = "https://raw.githubusercontent.com/istio/istio/release-1.28/security/tools/jwt/samples/"

// TestDocsJWTAuthorizationTask walks istio.io's "JWT Token" authorization task
// (tasks/security/authorization/authz-jwt) as written, each command changed only from
// kubectl/istioctl to meshlab: namespace foo made with `create ns`, httpbin and curl
// applied through `kube-inject -f` of Istio's samples, every request sent with the page's
// exec line (the pod found by `get pod -l app=curl -o jsonpath={.items..metadata.name}`),
// the RequestAuthentication and AuthorizationPolicies given on stdin in the page's
// v1beta1 form with the sample's jwksUri, and the tokens fetched with the page's
// `curl <github_file>/.../demo.jwt -s` (from the curl pod: see jwtSample), their
// payloads checked against what the page prints.
func TestDocsJWTAuthorizationTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	d := startDocsLab(t)
	d.kubectl("", "create", "ns", "foo")
	for _, f := range []string{"httpbin/httpbin.yaml", "curl/curl.yaml"} {
		injected := filepath.Join(t.TempDir(), "injected.yaml")
		if err := os.WriteFile(injected, []byte(d.kubectl("", "kube-inject", "-f", filepath.Join(samples, f))), 0o644); err != nil {
			t.Fatal(err)
		}
		d.kubectl("", "apply", "-f", injected, "-n", "foo")
	}
	d.step("httpbin and curl applied in foo")
	pod := strings.TrimSpace(d.poll("the curl pod", func(s string) bool { return strings.HasPrefix(s, "curl-") },
		"get", "pod", "-l", "app=curl", "-n", "foo", "-o", "jsonpath={.items..metadata.name}"))
	// The page's request line: the status code of curl's answer, polled as the page says
	// ("retry after a few seconds").
	code := func(want, path string, header ...string) {
		t.Helper()
		args := []string{"exec", pod, "-c", "curl", "-n", "foo", "--", "curl", "http://httpbin.foo:8000" + path, "-sS", "-o", "/dev/null"}
		if len(header) > 0 {
			args = append(args, "-H", header[0])
		}
		args = append(args, "-w", "%{http_code}\n")
		d.poll(want, func(s string) bool { return s == want+"\n" }, args...)
	}
	code("200", "/ip")
	d.step("curl reaches httpbin")

	d.kubectl(`apiVersion: "security.istio.io/v1beta1"
kind: "RequestAuthentication"
metadata:
  name: "jwt-example"
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "`+jwtSamplesBranchURL+`jwks.json"
`, "apply", "-f", "-")
	code("401", "/headers", "Authorization: Bearer invalidToken")
	code("200", "/headers")
	d.step("RequestAuthentication: an invalid token 401, none 200")

	const requireJWT = `apiVersion: security.istio.io/v1beta1
kind: AuthorizationPolicy
metadata:
  name: require-jwt
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: ALLOW
  rules:
  - from:
    - source:
       requestPrincipals: ["testing@secure.istio.io/testing@secure.istio.io"]
`
	d.kubectl(requireJWT, "apply", "-f", "-")
	token := d.jwtSample(pod, "demo.jwt", `{"exp":4685989700,"foo":"bar","iat":1532389700,"iss":"testing@secure.istio.io","sub":"testing@secure.istio.io"}`)
	code("200", "/headers", "Authorization: Bearer "+token)
	code("403", "/headers")
	d.step("require-jwt: demo.jwt 200, none 403")

	d.kubectl(requireJWT+`    when:
    - key: request.auth.claims[groups]
      values: ["group1"]
`, "apply", "-f", "-")
	// The page prints exp 3537391104 and iat 1537391104, from an older groups-scope.jwt
	// than Istio's tree holds today (exp 4685989700, iat 1532389700): the claims match.
	group := d.jwtSample(pod, "groups-scope.jwt", `"groups":["group1","group2"],"iat":`, `,"iss":"testing@secure.istio.io","scope":["scope1","scope2"],"sub":"testing@secure.istio.io"}`)
	code("200", "/headers", "Authorization: Bearer "+group)
	code("403", "/headers", "Authorization: Bearer "+token)
	d.step("require-jwt with groups: groups-scope.jwt 200, demo.jwt 403")

	d.kubectl("", "delete", "namespace", "foo")
}

// jwtSample runs the page's TOKEN=$(curl <github_file>/security/tools/jwt/samples/<name> -s)
// and checks the payload as the page decodes it (cut -d '.' -f2 | base64 --decode)
// against what the page prints. The page runs curl in the reader's shell, on the
// internet; here it runs in the curl pod, whose outside world is the lab's (it answers
// raw.githubusercontent.com's paths with the module's files under the world's CA, which
// the host's own curl neither resolves nor trusts).
func (d *docsLab) jwtSample(pod, name string, payload ...string) string {
	d.t.Helper()
	out := d.kubectl("", "exec", pod, "-c", "curl", "-n", "foo", "--", "curl", jwtSamplesBranchURL+name, "-s")
	token := strings.TrimSpace(out)
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		d.t.Fatalf("curl %s%s -s:\n%s\nwant a JWT", jwtSamplesBranchURL, name, out)
	}
	got, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	for _, p := range payload {
		if err != nil || !strings.Contains(string(got), p) {
			d.t.Errorf("%s's payload: %s (%v), want the page's %s", name, got, err, p)
		}
	}
	return token
}
