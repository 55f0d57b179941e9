package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/meshlab/meshlab/internal/testutil"
)

// jwtSamples are httpbin and curl in namespace foo, as Istio's authentication and JWT
// authorization tasks deploy them (Deployments naming the sample images).
const jwtSamples = `apiVersion: v1
kind: Namespace
metadata: {name: foo, labels: {istio-injection: enabled}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: httpbin, namespace: foo}
---
apiVersion: v1
kind: Service
metadata: {name: httpbin, namespace: foo, labels: {app: httpbin, service: httpbin}}
spec:
  ports: [{name: http, port: 8000, targetPort: 8080}]
  selector: {app: httpbin}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: httpbin, namespace: foo}
spec:
  replicas: 1
  selector: {matchLabels: {app: httpbin, version: v1}}
  template:
    metadata: {labels: {app: httpbin, version: v1}}
    spec:
      serviceAccountName: httpbin
      containers:
      - {image: docker.io/mccutchen/go-httpbin:v2.15.0, name: httpbin, ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: curl, namespace: foo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: curl, namespace: foo}
spec:
  replicas: 1
  selector: {matchLabels: {app: curl}}
  template:
    metadata: {labels: {app: curl}}
    spec:
      serviceAccountName: curl
      containers:
      - {name: curl, image: curlimages/curl, command: ["/bin/sleep", "infinity"]}
`

const jwtIssuer = "testing@secure.istio.io"

// jwtSigner signs tokens with a key generated for the test; jwks is its public key set.
type jwtSigner struct {
	key  *rsa.PrivateKey
	jwks string
}

func newJWTSigner(t *testing.T) jwtSigner {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "test", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return jwtSigner{key: k, jwks: string(b)}
}

func (s jwtSigner) token(t *testing.T, claims map[string]any) string {
	t.Helper()
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: s.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "test"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := sg.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJWTAuthenticationAndAuthorization runs Istio's "authentication policy" and
// "authorization with JWT" tasks: a RequestAuthentication on httpbin makes a valid token
// pass, an invalid one 401, and no token pass until an AuthorizationPolicy requires a
// request principal (403); a claim rule lets only group1 in; ipBlocks allow and deny by
// the caller's address.
func TestJWTAuthenticationAndAuthorization(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	l := startLab(t, write("samples.yaml", jwtSamples))
	apply := func(name, body string) {
		t.Helper()
		if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", write(name, body)); err != nil {
			t.Fatalf("apply %s: %v\n%s", name, err, out)
		}
	}
	// curl from the curl pod to httpbin.foo:8000/headers, as the tasks do; the answer's
	// code and body.
	call := func(token string) (string, string) {
		t.Helper()
		args := []string{"exec", "--name", l.name, "deploy/curl", "--", "curl", "-sS", "--max-time", "5", "-w", "\n%{http_code}", "http://httpbin.foo:8000/headers"}
		if token != "" {
			args = append(args, "-H", "Authorization: Bearer "+token)
		}
		out, err := meshlab(t, args...)
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		out = strings.TrimRight(out, "\n")
		i := strings.LastIndexByte(out, '\n')
		return out[i+1:], out[:max(i, 0)]
	}
	// expect waits for the configuration to reach the sidecar: the answer must become
	// code (with body containing want) within 15 s.
	expect := func(what, token, code, want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got, body := call(token)
			if got == code && strings.Contains(body, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: got %s %q, want %s with %q", what, got, body, code, want)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}

	s := newJWTSigner(t)
	other := newJWTSigner(t)
	exp := time.Now().Add(time.Hour).Unix()
	valid := s.token(t, map[string]any{"iss": jwtIssuer, "sub": jwtIssuer, "exp": exp, "groups": []string{"group1", "group2"}})
	group2 := s.token(t, map[string]any{"iss": jwtIssuer, "sub": jwtIssuer, "exp": exp, "groups": []string{"group2"}})
	forged := other.token(t, map[string]any{"iss": jwtIssuer, "sub": jwtIssuer, "exp": exp})
	expired := s.token(t, map[string]any{"iss": jwtIssuer, "sub": jwtIssuer, "exp": time.Now().Add(-time.Hour).Unix()})

	expect("before any policy", "deadbeef", "200", "")
	jwks, _ := json.Marshal(s.jwks)
	apply("ra.yaml", `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt-example, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  jwtRules:
  - issuer: "`+jwtIssuer+`"
    jwks: `+string(jwks)+`
`)
	expect("invalid token", "deadbeef", "401", "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections")
	expect("token of another key", forged, "401", "Jwt verification fails")
	expect("expired token", expired, "401", "Jwt is expired")
	expect("valid token", valid, "200", `"Host"`)
	// forwardOriginalToken is false: the sidecar removed the verified token.
	if _, body := call(valid); strings.Contains(body, "Authorization") {
		t.Errorf("httpbin received the Authorization header; jwt_authn must remove it without forwardOriginalToken:\n%s", body)
	}
	expect("no token without a policy", "", "200", "")

	apply("require.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: ALLOW
  rules:
  - from:
    - source: {requestPrincipals: ["`+jwtIssuer+`/`+jwtIssuer+`"]}
`)
	expect("no token with requestPrincipals", "", "403", "RBAC: access denied")
	expect("valid token with requestPrincipals", valid, "200", "")
	expect("invalid token is still 401", forged, "401", "Jwt verification fails")

	apply("groups.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: ALLOW
  rules:
  - from:
    - source: {requestPrincipals: ["`+jwtIssuer+`/`+jwtIssuer+`"]}
    when:
    - {key: "request.auth.claims[groups]", values: ["group1"]}
`)
	expect("group2 only", group2, "403", "RBAC: access denied")
	expect("group1 member", valid, "200", "")

	ipPolicy := func(name, action, block string) string {
		return `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ` + name + `, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: ` + action + `
  rules:
  - from:
    - source: {ipBlocks: ["` + block + `"]}
`
	}
	// The caller is in the pod CIDR (10.244.0.0/16), never in TEST-NET-1.
	apply("ip-allow-other.yaml", ipPolicy("require-jwt", "ALLOW", "192.0.2.0/24"))
	expect("ALLOW ipBlocks without the caller", "", "403", "RBAC: access denied")
	apply("ip-allow-pods.yaml", ipPolicy("require-jwt", "ALLOW", "10.244.0.0/16"))
	expect("ALLOW ipBlocks holding the caller", "", "200", "")
	apply("ip-deny-other.yaml", ipPolicy("deny-ips", "DENY", "192.0.2.0/24"))
	// give the DENY policy time to arrive before trusting a 200
	time.Sleep(2 * time.Second)
	expect("DENY ipBlocks without the caller", "", "200", "")
	apply("ip-deny-pods.yaml", ipPolicy("deny-ips", "DENY", "10.244.0.0/16"))
	expect("DENY ipBlocks holding the caller", "", "403", "RBAC: access denied")
}
