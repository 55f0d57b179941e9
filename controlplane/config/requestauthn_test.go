package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func ra(ns, name, spec string) string {
	return "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + spec
}

// testJWKS returns a JSON Web Key Set with one fresh ES256 public key.
func testJWKS(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every implemented RequestAuthentication field and the new AuthorizationPolicy fields
// load into the model, sorted, with an empty selector normalised to nil.
func TestLoadRequestAuthentication(t *testing.T) {
	t.Parallel()
	jwks, _ := json.Marshal(testJWKS(t))
	full := ra("default", "b-jwt", `  selector: {matchLabels: {app: backend}}
  jwtRules:
  - issuer: testing@secure.istio.io
    audiences: [app, "https://api.example.com"]
    jwks: `+string(jwks)+`
    fromHeaders: [{name: x-jwt-assertion, prefix: "Bearer "}]
    fromParams: [my_token]
    outputPayloadToHeader: x-jwt-payload
    forwardOriginalToken: true
    outputClaimToHeaders: [{header: x-jwt-group, claim: groups}]
    spaceDelimitedClaims: [roles]
  - issuer: other
    jwksUri: http://jwks.default.svc.cluster.local:8000/jwks.json
`)
	mesh := ra("istio-system", "a-mesh", "  selector: {}\n  jwtRules: [{issuer: x, jwksUri: \"https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/jwks.json\"}]\n")
	policy := ap("require", `  action: ALLOW
  rules:
  - from:
    - source: {requestPrincipals: ["testing@secure.istio.io/*"], notRequestPrincipals: [x/y], ipBlocks: [10.0.0.0/8, 1.2.3.4], notIpBlocks: [10.1.0.0/16], remoteIpBlocks: [127.0.0.1], notRemoteIpBlocks: ["::1"]}
    when:
    - {key: "request.auth.claims[groups]", values: [group1]}
    - {key: "request.auth.claims[nested][key]", values: ["*"]}
    - {key: request.auth.principal, values: ["*"]}
    - {key: request.auth.audiences, values: [app]}
    - {key: request.auth.presenter, notValues: [x]}
    - {key: source.ip, values: [10.0.0.0/8]}
    - {key: remote.ip, notValues: [192.168.0.1]}
`)
	s, err := Load("t.yaml", []byte(docs(helloYAML(t), full, mesh, policy)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var names []string
	for _, c := range m.Istio.RequestAuthentications {
		names = append(names, c.Namespace+"/"+c.Name)
	}
	if want := []string{"default/b-jwt", "istio-system/a-mesh"}; !slices.Equal(names, want) {
		t.Fatalf("RequestAuthentications = %v, want %v", names, want)
	}
	if m.Istio.RequestAuthentications[1].Spec.GetSelector() != nil {
		t.Errorf("an empty selector must be nil in the model")
	}
	r := m.Istio.RequestAuthentications[0].Spec.GetJwtRules()[0]
	if r.GetOutputClaimToHeaders()[0].GetClaim() != "groups" || !r.GetForwardOriginalToken() || r.GetFromParams()[0] != "my_token" || !slices.Equal(r.GetSpaceDelimitedClaims(), []string{"roles"}) {
		t.Errorf("rule not kept as written: %v", r)
	}
	if got := len(m.Istio.AuthorizationPolicies); got != 1 {
		t.Fatalf("AuthorizationPolicies = %d, want 1", got)
	}
}

func TestLoadRequestAuthenticationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "unimplemented fields by name",
			doc:  ra("default", "r", "  targetRef: {kind: Service, name: x}\n  jwtRules: [{issuer: x, jwks: '{\"keys\":[]}', fromCookies: [c], timeout: 5s}]\n"),
			want: []string{
				"t.yaml: RequestAuthentication default/r: spec.targetRef: is not supported by meshlab (RequestAuthentication supports here: jwtRules, selector)",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[0].fromCookies: is not supported by meshlab",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[0].timeout: is not supported by meshlab",
				`t.yaml: RequestAuthentication default/r: spec.jwtRules[0].jwks: is not a JSON Web Key Set: no "keys"`,
			},
		},
		{
			name: "rules",
			doc: ra("default", "r", `  jwtRules:
  - audiences: [""]
  - {issuer: a, jwksUri: "ftp://x/jwks"}
  - {issuer: a, jwksUri: "http:///jwks"}
  - {issuer: a, jwks: "{", jwksUri: "http://x/"}
  - {issuer: a, jwks: '{"keys":[{"kty":"RSA"}]}'}
  - {issuer: a, fromHeaders: [{prefix: "Bearer "}, {name: "bad header"}], fromParams: [""], outputPayloadToHeader: "a:b"}
  - {issuer: a, outputClaimToHeaders: [{claim: sub}, {header: x-sub}]}
`),
			want: []string{
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[0]: issuer or jwksUri is required",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[0].audiences[0]: must not be empty",
				`t.yaml: RequestAuthentication default/r: spec.jwtRules[1].jwksUri: "ftp://x/jwks": scheme "ftp" is not supported (http or https)`,
				`t.yaml: RequestAuthentication default/r: spec.jwtRules[2].jwksUri: "http:///jwks" has no host`,
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[3].jwks: set jwks or jwksUri, not both",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[3].jwks: is not a JSON Web Key Set: unexpected end of JSON input",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[4].jwks: keys[0]: ",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[5].fromHeaders[0].name: is required",
				`t.yaml: RequestAuthentication default/r: spec.jwtRules[5].fromHeaders[1].name: "bad header" is not an HTTP header name`,
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[5].fromParams[0]: must not be empty",
				`t.yaml: RequestAuthentication default/r: spec.jwtRules[5].outputPayloadToHeader: "a:b" is not an HTTP header name`,
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[6].outputClaimToHeaders[0].header: is required",
				"t.yaml: RequestAuthentication default/r: spec.jwtRules[6].outputClaimToHeaders[1].claim: is required",
			},
		},
		{
			name: "strict decoding",
			doc:  ra("default", "r", "  jwtRules: [{issuer: a, jwksURI: x}]\n"),
			want: []string{"t.yaml: RequestAuthentication default/r: spec.jwtRules[0].jwksURI: unknown field"},
		},
		{
			name: "version",
			doc:  "apiVersion: security.istio.io/v1alpha1\nkind: RequestAuthentication\nmetadata: {name: r}\nspec: {}\n",
			want: []string{`t.yaml: RequestAuthentication default/r: apiVersion: "security.istio.io/v1alpha1": version v1alpha1 is not one meshlab reads (v1beta1, v1)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("t.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatal("Load succeeded, want errors")
			}
			got := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					if strings.HasPrefix(g, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing error %q in:\n%s", w, err)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%s", len(got), len(tt.want), err)
			}
		})
	}
}
