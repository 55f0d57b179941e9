// Package jwtauthn is the proxy's envoy.filters.http.jwt_authn: it extracts JSON Web
// Tokens from a request (the Authorization bearer header and access_token parameter by
// default, or each provider's from_headers and from_params), verifies them against the
// provider's JWKS (signature, issuer, audiences, exp and nbf with Envoy's 60 s clock
// skew), evaluates the rule's requirement tree as Envoy's verifiers do, and on success
// writes each good token's payload into the request's dynamic metadata under
// payload_in_metadata, for RBAC's metadata matchers. A failed requirement answers 401
// (403 for audiences) with jwt_verify_lib's status text as the body. Keys are parsed and
// signatures verified with go-jose; only the token's structure checks, which decide
// Envoy's error texts, are the package's own.
package jwtauthn

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// Filter name and config type.
const (
	FilterName = "envoy.filters.http.jwt_authn"
	ConfigType = "envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"
)

var allow = fieldcheck.Allow{
	ConfigType: {"providers", "rules", "bypass_cors_preflight"},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtProvider": {
		"issuer", "audiences", "local_jwks", "forward", "from_headers", "from_params",
		"forward_payload_header", "payload_in_metadata", "claim_to_headers",
		"normalize_payload_in_metadata", "clear_route_cache",
	},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtProvider.NormalizePayload": {"space_delimited_claims"},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtHeader":                    {"name", "value_prefix"},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtClaimToHeader":             {"header_name", "claim_name"},
	"envoy.config.core.v3.DataSource":                                         {"inline_string", "inline_bytes"},
	"envoy.extensions.filters.http.jwt_authn.v3.RequirementRule":              {"match", "requires"},
	"envoy.config.route.v3.RouteMatch":                                        {"prefix", "path"},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtRequirement": {
		"provider_name", "provider_and_audiences", "requires_any", "requires_all",
		"allow_missing_or_failed", "allow_missing",
	},
	"envoy.extensions.filters.http.jwt_authn.v3.ProviderWithAudiences": {"provider_name", "audiences"},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtRequirementOrList":  {"requirements"},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtRequirementAndList": {"requirements"},
	"google.protobuf.Empty": {},
	"envoy.extensions.filters.http.jwt_authn.v3.JwtProvider.JwtCacheConfig": {},
}

// Config is a compiled JwtAuthentication.
type Config struct {
	providers  []*provider // sorted by name: the order issuer lookups walk
	rules      []rule
	bypassCORS bool
}

type rule struct {
	prefix, path string // one is set
	v            verifier
}

type location struct {
	header, prefix string // a header location (prefix may be "")
	param          string // or a query parameter
}

type provider struct {
	name, issuer   string
	audiences      []string
	keys           []jose.JSONWebKey // nil: the JWKS did not parse (every token fails)
	forward        bool
	locations      []location
	payloadHeader  string
	payloadMeta    string
	claimHeaders   [][2]string // header, claim
	spaceDelimited map[string]bool
	// clearRoute: a good token of the provider clears the route cache (Result's
	// ClearRouteCache), so the route is selected again with its claim headers and payload.
	clearRoute bool
}

// Compile validates a JwtAuthentication typed_config and compiles it. A provider whose
// local JWKS does not parse is kept, as Envoy keeps it, and fails every token with
// "Jwks doesn't have any valid public key"; remote_jwks and other unimplemented fields
// are refused by name.
func Compile(a *anypb.Any) (*Config, error) {
	var c jwtv3.JwtAuthentication
	if err := a.UnmarshalTo(&c); err != nil {
		return nil, fmt.Errorf("unpack JwtAuthentication: %w", err)
	}
	return CompileProto(&c)
}

// CompileProto is Compile for an unpacked JwtAuthentication.
func CompileProto(c *jwtv3.JwtAuthentication) (*Config, error) {
	if err := c.ValidateAll(); err != nil {
		return nil, err
	}
	if err := allow.Check(c); err != nil {
		return nil, err
	}
	out := &Config{bypassCORS: c.GetBypassCorsPreflight()}
	byName := map[string]*provider{}
	names := make([]string, 0, len(c.GetProviders()))
	for name := range c.GetProviders() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, err := compileProvider(name, c.GetProviders()[name])
		if err != nil {
			return nil, fmt.Errorf("providers[%s].%w", name, err)
		}
		byName[name] = p
		out.providers = append(out.providers, p)
	}
	for i, r := range c.GetRules() {
		cr := rule{}
		switch m := r.GetMatch().GetPathSpecifier().(type) {
		case *routev3.RouteMatch_Prefix:
			cr.prefix = m.Prefix
		case *routev3.RouteMatch_Path:
			cr.path = m.Path
		default:
			return nil, fmt.Errorf("rules[%d].match: only prefix and path matches are supported by meshlab proxy", i)
		}
		if r.GetRequires() == nil {
			cr.v = allowAll{}
		} else {
			v, err := compileRequirement(r.GetRequires(), byName, nil)
			if err != nil {
				return nil, fmt.Errorf("rules[%d].requires.%w", i, err)
			}
			cr.v = v
		}
		out.rules = append(out.rules, cr)
	}
	return out, nil
}

func compileProvider(name string, p *jwtv3.JwtProvider) (*provider, error) {
	out := &provider{
		name: name, issuer: p.GetIssuer(), audiences: p.GetAudiences(), forward: p.GetForward(),
		payloadHeader: p.GetForwardPayloadHeader(), payloadMeta: p.GetPayloadInMetadata(),
	}
	var data []byte
	switch {
	case p.GetLocalJwks() == nil:
		return nil, errors.New("jwks_source_specifier: only local_jwks is supported by meshlab proxy (remote_jwks is not)")
	case p.GetLocalJwks().GetInlineString() != "":
		data = []byte(p.GetLocalJwks().GetInlineString())
	default:
		data = p.GetLocalJwks().GetInlineBytes()
	}
	out.keys = ParseJWKS(data)
	for _, h := range p.GetFromHeaders() {
		out.locations = append(out.locations, location{header: strings.ToLower(h.GetName()), prefix: h.GetValuePrefix()})
	}
	for _, q := range p.GetFromParams() {
		out.locations = append(out.locations, location{param: q})
	}
	if len(p.GetFromHeaders())+len(p.GetFromParams())+len(p.GetFromCookies()) == 0 {
		out.locations = []location{{header: "authorization", prefix: "Bearer "}, {param: "access_token"}}
	}
	for _, ch := range p.GetClaimToHeaders() {
		out.claimHeaders = append(out.claimHeaders, [2]string{strings.ToLower(ch.GetHeaderName()), ch.GetClaimName()})
	}
	if claims := p.GetNormalizePayloadInMetadata().GetSpaceDelimitedClaims(); len(claims) > 0 {
		out.spaceDelimited = map[string]bool{}
		for _, c := range claims {
			out.spaceDelimited[c] = true
		}
	}
	out.clearRoute = p.GetClearRouteCache()
	return out, nil
}

// ParseJWKS parses a JSON Web Key Set with go-jose, keeping the keys that parse as
// public keys (a private key's public half is used, as jwt_verify_lib reads only the
// public fields); nil when the document is not a key set or holds no usable key.
func ParseJWKS(data []byte) []jose.JSONWebKey {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil
	}
	var out []jose.JSONWebKey
	for _, k := range raw.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(k); err != nil {
			continue
		}
		if !key.IsPublic() {
			key = key.Public()
		}
		if key.Valid() {
			out = append(out, key)
		}
	}
	return out
}

func compileRequirement(r *jwtv3.JwtRequirement, providers map[string]*provider, parents []*provider) (verifier, error) {
	lookup := func(name string) (*provider, error) {
		p, ok := providers[name]
		if !ok {
			return nil, fmt.Errorf("Required provider ['%s'] is not configured.", name) //nolint:staticcheck,revive // Envoy's text
		}
		return p, nil
	}
	switch t := r.GetRequiresType().(type) {
	case *jwtv3.JwtRequirement_ProviderName:
		p, err := lookup(t.ProviderName)
		if err != nil {
			return nil, fmt.Errorf("provider_name: %w", err)
		}
		return providerVerifier{p: p}, nil
	case *jwtv3.JwtRequirement_ProviderAndAudiences:
		p, err := lookup(t.ProviderAndAudiences.GetProviderName())
		if err != nil {
			return nil, fmt.Errorf("provider_and_audiences: %w", err)
		}
		return providerVerifier{p: p, audiences: t.ProviderAndAudiences.GetAudiences(), ownAudiences: true}, nil
	case *jwtv3.JwtRequirement_RequiresAny:
		return compileAny(t.RequiresAny.GetRequirements(), providers)
	case *jwtv3.JwtRequirement_RequiresAll:
		all := allVerifier{}
		for i, c := range t.RequiresAll.GetRequirements() {
			v, err := compileRequirement(c, providers, nil)
			if err != nil {
				return nil, fmt.Errorf("requires_all.requirements[%d].%w", i, err)
			}
			all = append(all, v)
		}
		return all, nil
	case *jwtv3.JwtRequirement_AllowMissingOrFailed:
		return bypassVerifier{providers: parents, allowFailed: true}, nil
	case *jwtv3.JwtRequirement_AllowMissing:
		return bypassVerifier{providers: parents}, nil
	}
	return allowAll{}, nil
}

// compileAny is Envoy's AnyVerifierImpl: the regular requirements in order, then at
// most one bypass requirement (allow_missing_or_failed over allow_missing), which looks
// at the tokens of the providers the list names.
func compileAny(reqs []*jwtv3.JwtRequirement, providers map[string]*provider) (verifier, error) {
	var out anyVerifier
	var bypass *jwtv3.JwtRequirement
	var used []*provider
	for i, c := range reqs {
		switch t := c.GetRequiresType().(type) {
		case *jwtv3.JwtRequirement_AllowMissing, *jwtv3.JwtRequirement_AllowMissingOrFailed:
			if bypass == nil || bypass.GetAllowMissing() != nil {
				bypass = c
			}
			continue
		case *jwtv3.JwtRequirement_ProviderName:
			if p, ok := providers[t.ProviderName]; ok {
				used = append(used, p)
			}
		case *jwtv3.JwtRequirement_ProviderAndAudiences:
			if p, ok := providers[t.ProviderAndAudiences.GetProviderName()]; ok {
				used = append(used, p)
			}
		}
		v, err := compileRequirement(c, providers, nil)
		if err != nil {
			return nil, fmt.Errorf("requires_any.requirements[%d].%w", i, err)
		}
		out = append(out, v)
	}
	if bypass != nil {
		v, err := compileRequirement(bypass, providers, used)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
