package demoapp

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// ExternalGitHubRaw is where Istio's JWT tasks fetch their sample key set and tokens:
// https://raw.githubusercontent.com/istio/istio/<branch>/security/tools/jwt/samples/
// jwks.json, demo.jwt and groups-scope.jwt. The outside world answers those paths with a
// key of its own (made once per lab process; Istio's sample key is not copied) and tokens
// it signed with the claims the tasks rely on, so a RequestAuthentication whose jwksUri
// names the sample, and the TOKEN=$(curl ...) steps, work unchanged. key.pem is that
// key's private half and gen-jwt.py Istio's script (from the Istio module), so the
// authn-policy task's `gen-jwt.py ./key.pem --expire 5` signs tokens the key set verifies.
const ExternalGitHubRaw = "raw.githubusercontent.com"

// jwtSamplesDir is the directory of the samples below any branch of istio/istio.
const jwtSamplesDir = "/security/tools/jwt/samples/"

// The samples' issuer and subject, and the claims of groups-scope.jwt, as the tasks
// show them when they decode the tokens.
const jwtSampleIssuer = "testing@secure.istio.io"

// JWTSamples is a key set and the tokens it signed.
type JWTSamples struct {
	JWKS   []byte            // the public key set (jwks.json)
	KeyPEM []byte            // the private key, PKCS #1 PEM (key.pem, which gen-jwt.py signs with)
	Tokens map[string]string // file name -> compact JWT
}

// jwtSamples is the process's samples, made on first use.
var jwtSamples = sync.OnceValues(newJWTSamples)

// SampleJWTs returns the outside world's JWT samples (the same for the whole process).
func SampleJWTs() (*JWTSamples, error) { return jwtSamples() }

func newJWTSamples() (*JWTSamples, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("make the JWT sample key: %w", err)
	}
	// The key's id is its RFC 7638 thumbprint, as Istio's sample key set names its key:
	// gen-jwt.py (jwcrypto) puts that thumbprint in the tokens it signs with key.pem, and
	// the JWT filter skips a key whose id differs from the token's.
	thumb, err := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("thumbprint the JWT sample key: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(thumb)
	pub := jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: string(jose.RS256), Use: "sig"}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	if err != nil {
		return nil, fmt.Errorf("encode the JWT sample key set: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return nil, fmt.Errorf("make the JWT sample signer: %w", err)
	}
	// The samples' times: issued 2018-07-23, expiring in 2118.
	base := map[string]any{"iss": jwtSampleIssuer, "sub": jwtSampleIssuer, "iat": 1532389700, "exp": 4685989700}
	claims := map[string]map[string]any{
		"demo.jwt":         {"foo": "bar"},
		"groups-scope.jwt": {"groups": []string{"group1", "group2"}, "scope": []string{"scope1", "scope2"}},
	}
	s := &JWTSamples{
		JWKS:   jwks,
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		Tokens: map[string]string{},
	}
	for file, extra := range claims {
		tok, err := jwt.Signed(signer).Claims(base).Claims(extra).Serialize()
		if err != nil {
			return nil, fmt.Errorf("sign %s: %w", file, err)
		}
		s.Tokens[file] = tok + "\n" // the sample files end with a newline; curl's $(...) drops it
	}
	return s, nil
}

// gitHubRaw serves the JWT samples below any branch, and Istio's samples/ from the
// Istio module (istiosamples.go); everything else is GitHub's 404. The
// samples (an RSA key: 50-500 ms of CPU) are made on the first request for them, not
// when the lab makes its outside world: most labs never ask, and the lab's `up` is
// CPU-bound (docs/BENCHMARKS.md, "100 pods").
func gitHubRaw() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, file, ok := strings.Cut(r.URL.Path, jwtSamplesDir)
		var body []byte
		var s *JWTSamples
		if ok && strings.HasPrefix(r.URL.Path, "/istio/istio/") {
			var err error
			if s, err = SampleJWTs(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		switch {
		case s == nil:
		case file == "jwks.json":
			body = s.JWKS
		case file == "key.pem":
			body = s.KeyPEM
		case s.Tokens[file] != "":
			body = []byte(s.Tokens[file])
		case file == "gen-jwt.py":
			// Istio's script from the Istio module, unchanged: it signs with key.pem.
			body, _ = os.ReadFile(filepath.Join(IstioModuleDir(), "security", "tools", "jwt", "samples", file))
		}
		if local, ok := IstioSampleFile(r.URL.Path); body == nil && ok {
			body, _ = os.ReadFile(local) // istiosamples.go: the Istio module's samples/
		}
		if body == nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("404: Not Found"))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(body)
	})
}
