package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/proto"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// RequestAuthentication (security.istio.io v1beta1 and v1, one schema) is checked as
// Istio's ValidateRequestAuthentication does, on the object alone: an issuer or a
// jwksUri in every rule, a jwksUri istiod could fetch (http or https), inline jwks
// that parse as a JSON Web Key Set, non-empty audiences, locations and claim headers.

func requestAuthenticationPaths() string {
	return strings.Join([]string{
		"selector selector.matchLabels jwtRules",
		expand("jwtRules", "issuer audiences jwksUri jwks fromHeaders fromParams outputPayloadToHeader forwardOriginalToken outputClaimToHeaders spaceDelimitedClaims"),
		expand("jwtRules.fromHeaders", "name prefix"),
		expand("jwtRules.outputClaimToHeaders", "header claim"),
	}, " ")
}

var requestAuthenticationFields = lazyFields(requestAuthenticationPaths)

// validateRequestAuthentication checks a RequestAuthentication on its own.
func validateRequestAuthentication(ra *security.RequestAuthentication, p problems) {
	refuseUnimplemented(ra.ProtoReflect(), requestAuthenticationFields(), "RequestAuthentication", p)
	checkSelector(ra.GetSelector(), "spec.selector", p)
	for i, r := range ra.GetJwtRules() {
		checkJWTRule(r, fmt.Sprintf("spec.jwtRules[%d]", i), p)
	}
}

func checkJWTRule(r *security.JWTRule, f string, p problems) {
	if r == nil {
		p.addf(f, "must not be null")
		return
	}
	if r.GetIssuer() == "" && r.GetJwksUri() == "" {
		p.addf(f, "issuer or jwksUri is required")
	}
	for i, a := range r.GetAudiences() {
		if a == "" {
			p.addf(fmt.Sprintf("%s.audiences[%d]", f, i), "must not be empty")
		}
	}
	if u := r.GetJwksUri(); u != "" {
		if _, _, err := ParseJWKSURI(u); err != nil {
			p.addf(f+".jwksUri", "%v", err)
		}
	}
	if r.GetJwks() != "" && r.GetJwksUri() != "" {
		p.addf(f+".jwks", "set jwks or jwksUri, not both")
	}
	if ks := r.GetJwks(); ks != "" {
		if err := checkJWKS(ks); err != nil {
			p.addf(f+".jwks", "%v", err)
		}
	}
	for i, h := range r.GetFromHeaders() {
		hf := fmt.Sprintf("%s.fromHeaders[%d]", f, i)
		switch {
		case h == nil:
			p.addf(hf, "must not be null")
		case h.GetName() == "":
			p.addf(hf+".name", "is required")
		default:
			checkJWTHeaderName(h.GetName(), hf+".name", p)
		}
	}
	for i, q := range r.GetFromParams() {
		if q == "" {
			p.addf(fmt.Sprintf("%s.fromParams[%d]", f, i), "must not be empty")
		}
	}
	if h := r.GetOutputPayloadToHeader(); h != "" {
		checkJWTHeaderName(h, f+".outputPayloadToHeader", p)
	}
	for i, c := range r.GetOutputClaimToHeaders() {
		cf := fmt.Sprintf("%s.outputClaimToHeaders[%d]", f, i)
		switch {
		case c == nil:
			p.addf(cf, "must not be null")
			continue
		case c.GetHeader() == "":
			p.addf(cf+".header", "is required")
		default:
			checkJWTHeaderName(c.GetHeader(), cf+".header", p)
		}
		if c.GetClaim() == "" {
			p.addf(cf+".claim", "is required")
		}
	}
}

// checkJWTHeaderName checks an HTTP header name as Istio's ValidateStrictHTTPHeaderName: an
// RFC 7230 token.
func checkJWTHeaderName(h, f string, p problems) {
	for _, c := range h {
		if c > 0x7e || c <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c) {
			p.addf(f, "%q is not an HTTP header name", h)
			return
		}
	}
}

// checkJWKS parses an inline JSON Web Key Set with go-jose, as Istio parses it before
// accepting the object: at least one key, each of a type go-jose reads.
func checkJWKS(s string) error {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return fmt.Errorf("is not a JSON Web Key Set: %w", err)
	}
	if len(raw.Keys) == 0 {
		return fmt.Errorf(`is not a JSON Web Key Set: no "keys"`)
	}
	for i, k := range raw.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(k); err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
	}
	return nil
}

// ParseJWKSURI checks a jwksUri as Istio's ParseJwksURI: an http or https URL with a
// host; it returns the host and port (80 or 443 when the URL names none).
func ParseJWKSURI(s string) (string, uint16, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not a URL: %w", s, err)
	}
	var port uint16
	switch u.Scheme {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return "", 0, fmt.Errorf("%q: scheme %q is not supported (http or https)", s, u.Scheme)
	}
	if u.Hostname() == "" {
		return "", 0, fmt.Errorf("%q has no host", s)
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil || n == 0 {
			return "", 0, fmt.Errorf("%q: %q is not a port", s, ps)
		}
		port = uint16(n)
	}
	return u.Hostname(), port, nil
}

// requestAuthenticationModel is peerAuthenticationModel for a RequestAuthentication.
func requestAuthenticationModel(o *Object) *model.IstioConfig[*security.RequestAuthentication] {
	ra := proto.Clone(o.RequestAuthentication).(*security.RequestAuthentication)
	if !hasSelector(ra.Selector) {
		ra.Selector = nil
	}
	return &model.IstioConfig[*security.RequestAuthentication]{Name: o.Origin.Name, Namespace: o.Origin.Namespace, Spec: ra, Origin: o.Origin}
}
