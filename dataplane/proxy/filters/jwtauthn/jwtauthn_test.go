package jwtauthn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

const issuer = "testing@secure.istio.io"

type keys struct {
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	jwks string // public RSA (kid r1) and EC (kid e1) keys
}

func newKeys(tb testing.TB) keys {
	tb.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &rk.PublicKey, KeyID: "r1", Algorithm: "RS256", Use: "sig"},
		{Key: &ek.PublicKey, KeyID: "e1", Algorithm: "ES256", Use: "sig"},
	}}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatal(err)
	}
	return keys{rsa: rk, ec: ek, jwks: string(b)}
}

// sign returns a compact JWS of claims signed with key (RS256 for RSA, ES256 for EC).
func sign(tb testing.TB, key any, kid string, claims map[string]any) string {
	tb.Helper()
	alg := jose.RS256
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		alg = jose.ES256
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func requires(names ...string) *jwtv3.JwtRequirement {
	or := []*jwtv3.JwtRequirement{}
	for _, n := range names {
		or = append(or, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: n}})
	}
	or = append(or, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}})
	return &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{Requirements: or}}}
}

// istioConfig is the filter config istiod generates for one jwtRule: provider
// origins-0 with inline keys, payload in metadata, required if present.
func istioConfig(jwks string, mutate func(*jwtv3.JwtProvider)) *jwtv3.JwtAuthentication {
	p := &jwtv3.JwtProvider{
		Issuer:                     issuer,
		JwksSourceSpecifier:        &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: jwks}}},
		PayloadInMetadata:          "payload",
		NormalizePayloadInMetadata: &jwtv3.JwtProvider_NormalizePayload{SpaceDelimitedClaims: []string{"permission", "scope"}},
	}
	if mutate != nil {
		mutate(p)
	}
	return &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{"origins-0": p},
		Rules: []*jwtv3.RequirementRule{{
			Match:           &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			RequirementType: &jwtv3.RequirementRule_Requires{Requires: requires("origins-0")},
		}},
		BypassCorsPreflight: true,
	}
}

func compile(t *testing.T, c *jwtv3.JwtAuthentication) *Config {
	t.Helper()
	a, err := anypb.New(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Compile(a)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return cfg
}

func request(target string, hdr ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Host = "httpbin.foo:8000"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestVerifyAsIstiosSingleRule(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	other := newKeys(t)
	now := time.Unix(1_800_000_000, 0)
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"iss": issuer, "sub": issuer, "exp": now.Add(time.Hour).Unix(), "groups": []string{"group1"}, "scope": "read write"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	good := sign(t, k.rsa, "r1", claims(nil))
	cfg := compile(t, istioConfig(k.jwks, nil))
	tests := []struct {
		name   string
		req    *http.Request
		status Status
		code   int
		www    string
	}{
		{name: "valid RS256 token", req: request("/headers", "Authorization", "Bearer "+good)},
		{name: "valid ES256 token", req: request("/headers", "Authorization", "Bearer "+sign(t, k.ec, "e1", claims(nil)))},
		{name: "no token passes", req: request("/headers")},
		{name: "token in access_token", req: request("/headers?access_token=" + good)},
		{name: "other key", req: request("/headers", "Authorization", "Bearer "+sign(t, other.rsa, "r1", claims(nil))), status: StatusVerificationFails, code: 401, www: `Bearer realm="http://httpbin.foo:8000/headers", error="invalid_token"`},
		{name: "unknown kid", req: request("/", "Authorization", "Bearer "+sign(t, k.rsa, "nope", claims(nil))), status: StatusKidAlgMismatch, code: 401},
		{name: "unknown issuer", req: request("/", "Authorization", "Bearer "+sign(t, k.rsa, "r1", claims(map[string]any{"iss": "someone-else"}))), status: StatusUnknownIssuer, code: 401},
		{name: "expired", req: request("/", "Authorization", "Bearer "+sign(t, k.rsa, "r1", claims(map[string]any{"exp": now.Add(-61 * time.Second).Unix()}))), status: StatusExpired, code: 401},
		{name: "expired within the clock skew", req: request("/", "Authorization", "Bearer "+sign(t, k.rsa, "r1", claims(map[string]any{"exp": now.Add(-59 * time.Second).Unix()})))},
		{name: "not yet valid", req: request("/", "Authorization", "Bearer "+sign(t, k.rsa, "r1", claims(map[string]any{"nbf": now.Add(2 * time.Minute).Unix()}))), status: StatusNotYetValid, code: 401},
		{name: "not two dots", req: request("/", "Authorization", "Bearer deadbeef"), status: StatusBadFormat, code: 401},
		{name: "bad header", req: request("/", "Authorization", "Bearer e30.e30.e30"), status: StatusHeaderBadAlg, code: 401},
		{name: "iss not a string", req: request("/", "Authorization", "Bearer "+sign(t, k.rsa, "r1", claims(map[string]any{"iss": 7}))), status: StatusIssNotString, code: 401},
		{name: "tampered payload", req: request("/", "Authorization", "Bearer "+tamper(good)), status: StatusVerificationFails, code: 401},
		{name: "CORS preflight bypassed", req: func() *http.Request {
			r := request("/", "Authorization", "Bearer deadbeef", "Origin", "http://x", "Access-Control-Request-Method", "GET")
			r.Method = http.MethodOptions
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := cfg.Verify(tt.req, now)
			if res.Status != tt.status || (tt.code != 0 && res.Code != tt.code) {
				t.Fatalf("Verify = %q (%d), want %q (%d)", res.Status, res.Code, tt.status, tt.code)
			}
			if tt.www != "" && res.WWWAuthenticate != tt.www {
				t.Errorf("www-authenticate = %q, want %q", res.WWWAuthenticate, tt.www)
			}
		})
	}

	// A good token's payload lands in the metadata, scope split into a list, and the
	// token's header is removed (forwardOriginalToken false).
	r := request("/", "Authorization", "Bearer "+good)
	res := cfg.Verify(r, now)
	if !res.OK() || res.Metadata == nil {
		t.Fatalf("Verify = %+v", res)
	}
	p := res.Metadata.GetFields()["payload"].GetStructValue().GetFields()
	if p["iss"].GetStringValue() != issuer || p["sub"].GetStringValue() != issuer {
		t.Errorf("payload iss/sub = %v", p)
	}
	if l := p["scope"].GetListValue().GetValues(); len(l) != 2 || l[1].GetStringValue() != "write" {
		t.Errorf("scope = %v, want [read write]", p["scope"])
	}
	if got := p["groups"].GetListValue().GetValues()[0].GetStringValue(); got != "group1" {
		t.Errorf("groups = %v", p["groups"])
	}
	if r.Header.Get("Authorization") != "" {
		t.Errorf("authorization header kept without forward")
	}
	if res.ResponseDetail() != "jwt_authn_access_denied{}" {
		t.Logf("detail of OK: %s", res.ResponseDetail())
	}
	bad := cfg.Verify(request("/", "Authorization", "Bearer x.y"), now)
	if d := bad.ResponseDetail(); d != "jwt_authn_access_denied{Jwt_is_not_in_the_form_of_Header.Payload.Signature_with_two_dots_and_3_sections}" {
		t.Errorf("detail = %s", d)
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	parts[1] = "eyJpc3MiOiJ0ZXN0aW5nQHNlY3VyZS5pc3Rpby5pbyIsInN1YiI6ImFkbWluIn0"
	return strings.Join(parts, ".")
}

func TestProviderOptions(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	now := time.Now()
	tok := sign(t, k.rsa, "r1", map[string]any{"iss": issuer, "sub": "alice", "aud": []string{"https://app.example.com/"}, "groups": "admins", "n": 3})
	cfg := compile(t, istioConfig(k.jwks, func(p *jwtv3.JwtProvider) {
		p.Audiences = []string{"app.example.com"}
		p.Forward = true
		p.ForwardPayloadHeader = "x-jwt-payload"
		p.FromHeaders = []*jwtv3.JwtHeader{{Name: "x-jwt-assertion", ValuePrefix: "Token "}}
		p.FromParams = []string{"my_token"}
		p.ClaimToHeaders = []*jwtv3.JwtClaimToHeader{{HeaderName: "x-jwt-group", ClaimName: "groups"}, {HeaderName: "x-n", ClaimName: "n"}}
	}))
	r := request("/", "x-jwt-assertion", "Token "+tok, "x-jwt-group", "spoofed")
	if res := cfg.Verify(r, now); !res.OK() {
		t.Fatalf("Verify = %q", res.Status)
	}
	if r.Header.Get("x-jwt-assertion") == "" {
		t.Errorf("forward: the token header must stay")
	}
	if got := r.Header.Values("x-jwt-group"); len(got) != 1 || got[0] != "admins" {
		t.Errorf("x-jwt-group = %v, want [admins] (the client's value stripped)", got)
	}
	if r.Header.Get("x-n") != "3" || r.Header.Get("x-jwt-payload") != strings.Split(tok, ".")[1] {
		t.Errorf("claim/payload headers: %v", r.Header)
	}
	// The default Authorization location is not used once from_headers is set: such a
	// token is not seen, and a missing token passes.
	if res := cfg.Verify(request("/", "Authorization", "Bearer garbage"), now); !res.OK() {
		t.Errorf("authorization ignored with from_headers: %q", res.Status)
	}
	if res := cfg.Verify(request("/?my_token="+tok), now); !res.OK() {
		t.Errorf("from_params: %q", res.Status)
	}
	wrongAud := sign(t, k.rsa, "r1", map[string]any{"iss": issuer, "aud": "other"})
	if res := cfg.Verify(request("/", "x-jwt-assertion", "Token "+wrongAud), now); res.Status != StatusAudienceNotAllow || res.Code != 403 {
		t.Errorf("audience: %q %d", res.Status, res.Code)
	}
}

func TestRequirementTrees(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	now := time.Now()
	a := istioConfig(k.jwks, nil)
	// Two rules as istiod writes them: OR{p0, p1, AND{OR{p0, missing}, OR{p1, missing}}}.
	p1 := istioConfig(k.jwks, func(p *jwtv3.JwtProvider) { p.Issuer = "issuer-2" }).GetProviders()["origins-0"]
	a.Providers["origins-1"] = p1
	one := func(n string) *jwtv3.JwtRequirement {
		return &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: n}}
	}
	a.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{Requirements: []*jwtv3.JwtRequirement{
		one("origins-0"), one("origins-1"),
		{RequiresType: &jwtv3.JwtRequirement_RequiresAll{RequiresAll: &jwtv3.JwtRequirementAndList{Requirements: []*jwtv3.JwtRequirement{requires("origins-0"), requires("origins-1")}}}},
	}}}}}
	cfg := compile(t, a)
	for _, tc := range []struct {
		iss  string
		want Status
	}{{issuer, StatusOK}, {"issuer-2", StatusOK}, {"issuer-3", StatusUnknownIssuer}} {
		tok := sign(t, k.rsa, "r1", map[string]any{"iss": tc.iss, "sub": "x"})
		if res := cfg.Verify(request("/", "Authorization", "Bearer "+tok), now); res.Status != tc.want {
			t.Errorf("iss %s: %q, want %q", tc.iss, res.Status, tc.want)
		}
	}
	if res := cfg.Verify(request("/"), now); !res.OK() {
		t.Errorf("no token: %q", res.Status)
	}

	// A bare provider requirement needs the token.
	strict := istioConfig(k.jwks, nil)
	strict.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: one("origins-0")}
	res := compile(t, strict).Verify(request("/x"), now)
	if res.Status != StatusMissing || res.WWWAuthenticate != `Bearer realm="http://httpbin.foo:8000/x"` {
		t.Errorf("missing: %q %q", res.Status, res.WWWAuthenticate)
	}

	// A provider whose keys do not parse fails every token.
	broken := compile(t, istioConfig(`{"keys":[{"kty":"RSA"}]}`, nil))
	if res := broken.Verify(request("/", "Authorization", "Bearer "+sign(t, k.rsa, "r1", map[string]any{"iss": issuer})), now); res.Status != StatusNoValidKeys {
		t.Errorf("broken jwks: %q", res.Status)
	}

	// A rule for another path does not apply.
	other := istioConfig(k.jwks, nil)
	other.Rules[0].Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/only"}}
	other.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: one("origins-0")}
	oc := compile(t, other)
	if res := oc.Verify(request("/elsewhere"), now); !res.OK() {
		t.Errorf("unmatched path: %q", res.Status)
	}
	if res := oc.Verify(request("/only?x=1"), now); res.Status != StatusMissing {
		t.Errorf("matched path: %q", res.Status)
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	remote := istioConfig("", nil)
	remote.Providers["origins-0"].JwksSourceSpecifier = &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{HttpUri: &corev3.HttpUri{Uri: "http://x/", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "c"}, Timeout: durationpb.New(time.Second)}}}
	cookies := istioConfig("{}", func(p *jwtv3.JwtProvider) { p.FromCookies = []string{"c"} })
	unknown := istioConfig("{}", nil)
	unknown.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "nope"}}}
	for name, c := range map[string]*jwtv3.JwtAuthentication{"remote": remote, "cookies": cookies, "unknown provider": unknown} {
		a, _ := anypb.New(c)
		_, err := Compile(a)
		if err == nil || !strings.Contains(err.Error(), "providers[origins-0]") && !strings.Contains(err.Error(), "rules[0]") {
			t.Errorf("%s: error %v, want one naming the field", name, err)
		}
	}
}
