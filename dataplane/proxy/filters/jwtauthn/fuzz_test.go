package jwtauthn

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzVerify feeds arbitrary key sets and tokens through the JWKS parser, the token
// parser and the verifier: none may panic, a token that does not parse must fail, and
// only a well-formed token can pass with a payload.
func FuzzVerify(f *testing.F) {
	k := newKeys(f)
	good := sign(f, k.rsa, "r1", map[string]any{"iss": issuer, "sub": "x", "exp": 4_000_000_000})
	f.Add(k.jwks, good)
	f.Add(k.jwks, "a.b.c")
	f.Add(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""}]}`, good)
	f.Add(`{"keys":{}}`, "e30.e30.")
	f.Add("", "..")
	f.Fuzz(func(t *testing.T, jwks, tok string) {
		ParseJWKS([]byte(jwks))
		a, err := anypb.New(istioConfig(jwks, nil))
		if err != nil {
			t.Skip()
		}
		cfg, err := Compile(a)
		if err != nil {
			return
		}
		r := request("/", "Authorization", "Bearer "+tok)
		res := cfg.Verify(r, time.Unix(1_800_000_000, 0))
		if _, st := parseJWT(tok); st != StatusOK && res.OK() && res.Metadata != nil {
			t.Fatalf("unparsable token %q produced a payload", tok)
		}
		if !res.OK() && res.Code != http.StatusUnauthorized && res.Code != http.StatusForbidden {
			t.Fatalf("refusal with code %d", res.Code)
		}
	})
}
