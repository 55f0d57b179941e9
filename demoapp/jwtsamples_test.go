package demoapp

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestJWTSamplesVerifyWithTheServedKeySet fetches the samples as Istio's JWT tasks do and
// checks each token verifies with the served key set and carries the claims the tasks
// match on (issuer and subject for requestPrincipals, groups for the claim rule).
func TestJWTSamplesVerifyWithTheServedKeySet(t *testing.T) {
	t.Parallel()
	h, err := ExternalHandler(ExternalGitHubRaw, true)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://"+ExternalGitHubRaw+path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	const dir = "/istio/istio/release-1.28/security/tools/jwt/samples/"
	code, body := get(dir + "jwks.json")
	if code != http.StatusOK {
		t.Fatalf("jwks.json: %d %s", code, body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(body), &set); err != nil || len(set.Keys) != 1 || !set.Keys[0].IsPublic() {
		t.Fatalf("jwks.json is not one public key: %v %s", err, body)
	}
	for file, wantGroups := range map[string]bool{"demo.jwt": false, "groups-scope.jwt": true} {
		code, tok := get(dir + file)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", file, code, tok)
		}
		parsed, err := jwt.ParseSigned(strings.TrimSpace(tok), []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var claims struct {
			jwt.Claims
			Groups []string `json:"groups"`
		}
		if err := parsed.Claims(set.Keys[0].Key, &claims); err != nil {
			t.Fatalf("%s does not verify with jwks.json: %v", file, err)
		}
		if claims.Issuer != "testing@secure.istio.io" || claims.Subject != "testing@secure.istio.io" {
			t.Errorf("%s: iss %q sub %q; want testing@secure.istio.io for both", file, claims.Issuer, claims.Subject)
		}
		if got := len(claims.Groups) == 2 && claims.Groups[0] == "group1"; got != wantGroups {
			t.Errorf("%s: groups %v", file, claims.Groups)
		}
	}
	for _, p := range []string{"/istio/istio/master/README.md", "/other/repo/main/security/tools/jwt/samples/jwks.json", dir + "missing.jwt"} {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("%s: %d; want 404", p, code)
		}
	}
}

// TestJWTSamplesKeyPEMAndGenJWT: key.pem is the private half of jwks.json's key (a PKCS
// #1 PEM, as Istio's), whose id is its RFC 7638 thumbprint (the kid gen-jwt.py's jwcrypto
// puts in the tokens it signs), and gen-jwt.py is Istio's script from the Istio module.
func TestJWTSamplesKeyPEMAndGenJWT(t *testing.T) {
	t.Parallel()
	h, err := ExternalHandler(ExternalGitHubRaw, true)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://"+ExternalGitHubRaw+path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	const dir = "/istio/istio/master/security/tools/jwt/samples/"
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(get(dir+"jwks.json")), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks.json: %v", err)
	}
	block, _ := pem.Decode([]byte(get(dir + "key.pem")))
	if block == nil || block.Type != "RSA PRIVATE KEY" {
		t.Fatalf("key.pem is not an RSA PRIVATE KEY PEM block: %v", block)
	}
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := set.Keys[0].Key.(*rsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		t.Fatal("key.pem is not the private half of jwks.json's key")
	}
	thumb, err := set.Keys[0].Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.RawURLEncoding.EncodeToString(thumb); set.Keys[0].KeyID != want {
		t.Errorf("kid %q, want the key's thumbprint %q", set.Keys[0].KeyID, want)
	}
	want, err := os.ReadFile(filepath.Join(IstioModuleDir(), "security/tools/jwt/samples/gen-jwt.py"))
	if err != nil {
		t.Fatal(err)
	}
	if got := get(dir + "gen-jwt.py"); got != string(want) || !strings.Contains(got, "jwcrypto") {
		t.Errorf("gen-jwt.py is not Istio's script (%d bytes)", len(got))
	}
}
