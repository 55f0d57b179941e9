package jwtauthn

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/types/known/structpb"
)

// Status is a jwt_verify_lib status: "" is OK, anything else its text.
type Status string

// The statuses the proxy produces, with jwt_verify_lib's texts.
const (
	StatusOK                Status = ""
	StatusMissing           Status = "Jwt is missing"
	StatusNotYetValid       Status = "Jwt not yet valid"
	StatusExpired           Status = "Jwt is expired"
	StatusBadFormat         Status = "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections"
	StatusHeaderBadBase64   Status = "Jwt header is an invalid Base64url encoded"
	StatusHeaderBadJSON     Status = "Jwt header is an invalid JSON"
	StatusHeaderBadAlg      Status = "Jwt header [alg] field is required and must be a string"
	StatusHeaderNotImplAlg  Status = "Jwt header [alg] is not supported"
	StatusHeaderBadKid      Status = "Jwt header [kid] field is not a string"
	StatusPayloadBadBase64  Status = "Jwt payload is an invalid Base64url encoded"
	StatusPayloadBadJSON    Status = "Jwt payload is an invalid JSON"
	StatusIssNotString      Status = "Jwt payload [iss] field is not a string"
	StatusSubNotString      Status = "Jwt payload [sub] field is not a string"
	StatusIatNotInteger     Status = "Jwt payload [iat] field is not an integer"
	StatusNbfNotInteger     Status = "Jwt payload [nbf] field is not an integer"
	StatusExpNotInteger     Status = "Jwt payload [exp] field is not an integer"
	StatusAudNotString      Status = "Jwt payload [aud] field is not a string or string list"
	StatusSignatureBase64   Status = "Jwt signature is an invalid Base64url encoded"
	StatusUnknownIssuer     Status = "Jwt issuer is not configured"
	StatusAudienceNotAllow  Status = "Audiences in Jwt are not allowed"
	StatusVerificationFails Status = "Jwt verification fails"
	StatusNoValidKeys       Status = "Jwks doesn't have any valid public key"
	StatusKidAlgMismatch    Status = "Jwks doesn't have key to match kid or alg from Jwt"
)

// clockSkew is jwt_verify_lib's kClockSkewInSecond.
const clockSkew = 60 * time.Second

// Result is the outcome of the filter on one request.
type Result struct {
	Status Status
	// Code is the local reply's status when Status is not OK: 403 for audiences, else 401.
	Code int
	// Metadata is the envoy.filters.http.jwt_authn dynamic metadata of an allowed
	// request (payload_in_metadata -> payload); nil when no token was verified.
	Metadata *structpb.Struct
	// ClearRouteCache reports whether a good token's provider asked for the route cache
	// to be cleared (clear_route_cache): the route is selected again, as Envoy's router
	// does after the filter, seeing the claim headers and the payload it wrote.
	ClearRouteCache bool
	// WWWAuthenticate is the www-authenticate header of the 401/403 reply.
	WWWAuthenticate string
	// CORSBypassed reports whether the request passed as a CORS preflight.
	CORSBypassed bool
}

// OK reports whether the request may continue.
func (r Result) OK() bool { return r.Status == StatusOK }

// ResponseDetail is Envoy's response code detail of a refused request:
// jwt_authn_access_denied{<status with spaces as underscores>}.
func (r Result) ResponseDetail() string {
	return "jwt_authn_access_denied{" + strings.Join(strings.Fields(string(r.Status)), "_") + "}"
}

// Verify runs the filter on r at time now: it may remove the token headers of verified
// tokens (forward false), add payload and claim headers, and strip such headers a client
// sent. The request's path is read from r.URL, its authority from r.Host.
func (c *Config) Verify(r *http.Request, now time.Time) Result {
	if c.bypassCORS && r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		return Result{CORSBypassed: true}
	}
	var v verifier
	path := r.URL.Path
	for _, rl := range c.rules {
		if (rl.path != "" && path == rl.path) || (rl.path == "" && strings.HasPrefix(path, rl.prefix)) {
			v = rl.v
			break
		}
	}
	if v == nil {
		return Result{}
	}
	ctx := &vctx{r: r, now: now, providers: c.providers, payload: map[string]*structpb.Value{}}
	st := v.verify(ctx)
	if st != StatusOK {
		code := http.StatusUnauthorized
		if st == StatusAudienceNotAllow {
			code = http.StatusForbidden
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		uri := scheme + "://" + r.Host + path
		if len(uri) > 256 {
			uri = uri[:256]
		}
		www := `Bearer realm="` + uri + `"`
		if st != StatusMissing {
			www += `, error="invalid_token"`
		}
		return Result{Status: st, Code: code, WWWAuthenticate: www}
	}
	res := Result{ClearRouteCache: ctx.clearRoute}
	if len(ctx.payload) > 0 {
		res.Metadata = &structpb.Struct{Fields: ctx.payload}
	}
	return res
}

type vctx struct {
	r         *http.Request
	now       time.Time
	providers []*provider
	payload   map[string]*structpb.Value
	// clearRoute: a good token's provider clears the route cache.
	clearRoute bool
}

// verifier is one node of a requirement tree, as Envoy's verifier.cc.
type verifier interface{ verify(*vctx) Status }

type allowAll struct{}

func (allowAll) verify(*vctx) Status { return StatusOK }

// anyVerifier passes when one child passes; otherwise it fails with the last child's
// status (Envoy completes the group when its last child completes).
type anyVerifier []verifier

func (a anyVerifier) verify(ctx *vctx) Status {
	st := StatusMissing
	for _, v := range a {
		if st = v.verify(ctx); st == StatusOK {
			return StatusOK
		}
	}
	return st
}

type allVerifier []verifier

func (a allVerifier) verify(ctx *vctx) Status {
	for _, v := range a {
		if st := v.verify(ctx); st != StatusOK {
			return st
		}
	}
	return StatusOK
}

type providerVerifier struct {
	p            *provider
	audiences    []string
	ownAudiences bool
}

func (v providerVerifier) verify(ctx *vctx) Status {
	sanitize(ctx.r, []*provider{v.p})
	aud := v.p.audiences
	if v.ownAudiences {
		aud = v.audiences
	}
	return authenticate(ctx, extract(ctx.r, []*provider{v.p}), v.p, aud, false, false)
}

// bypassVerifier is allow_missing (a token, if present, must be valid) or
// allow_missing_or_failed (always passes; good tokens still yield payloads), over the
// tokens of the providers its group names.
type bypassVerifier struct {
	providers   []*provider
	allowFailed bool
}

func (v bypassVerifier) verify(ctx *vctx) Status {
	sanitize(ctx.r, v.providers)
	return authenticate(ctx, extract(ctx.r, v.providers), nil, nil, v.allowFailed, !v.allowFailed)
}

// token is an extracted JWT with where it came from and the issuers that location
// serves ("" among them: any issuer).
type token struct {
	value   string
	loc     location
	issuers map[string]bool
}

func (t token) issuerAllowed(iss string) bool { return t.issuers[""] || t.issuers[iss] }

// extract finds the tokens of providers' locations, each location once, headers before
// parameters, as Envoy's ExtractorImpl.
func extract(r *http.Request, providers []*provider) []token {
	type key struct{ header, prefix, param string }
	issuers := map[key]map[string]bool{}
	var order []key
	for _, p := range providers {
		for _, l := range p.locations {
			k := key(l)
			if issuers[k] == nil {
				issuers[k] = map[string]bool{}
				order = append(order, k)
			}
			issuers[k][p.issuer] = true
		}
	}
	var out []token
	for _, k := range order {
		if k.header == "" {
			continue
		}
		for _, v := range r.Header.Values(k.header) {
			if t, ok := tokenAfterPrefix(v, k.prefix); ok {
				out = append(out, token{value: t, loc: location{header: k.header, prefix: k.prefix}, issuers: issuers[k]})
				break
			}
		}
	}
	if r.URL != nil {
		q := r.URL.Query()
		for _, k := range order {
			if k.param == "" {
				continue
			}
			if v := q.Get(k.param); v != "" {
				out = append(out, token{value: v, loc: location{param: k.param}, issuers: issuers[k]})
			}
		}
	}
	return out
}

// tokenAfterPrefix returns the JWT after prefix in a header value: Envoy looks for the
// prefix anywhere in the value and takes the run of JWT characters after it.
func tokenAfterPrefix(v, prefix string) (string, bool) {
	i := 0
	if prefix != "" {
		i = strings.Index(v, prefix)
		if i < 0 {
			return "", false
		}
		i += len(prefix)
	}
	rest := v[i:]
	tokenChar := func(c rune) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.=+/", c)
	}
	end := strings.IndexFunc(rest, func(c rune) bool { return !tokenChar(c) })
	if end >= 0 {
		rest = rest[:end]
	}
	return rest, rest != ""
}

// sanitize removes the payload and claim headers of providers a client may have sent,
// so that only the filter can set them.
func sanitize(r *http.Request, providers []*provider) {
	for _, p := range providers {
		if p.payloadHeader != "" {
			r.Header.Del(p.payloadHeader)
		}
		for _, ch := range p.claimHeaders {
			r.Header.Del(ch[0])
		}
	}
}

// authenticate is Envoy's AuthenticatorImpl: tokens are verified last first; without
// allow_failed or allow_missing the first failure decides, otherwise the last token's
// status does (a missing token passes; allow_failed passes everything).
func authenticate(ctx *vctx, tokens []token, p *provider, audiences []string, allowFailed, allowMissing bool) Status {
	final := func(st Status) Status {
		switch {
		case allowFailed:
			return StatusOK
		case allowMissing && st == StatusMissing:
			return StatusOK
		}
		return st
	}
	if len(tokens) == 0 {
		return final(StatusMissing)
	}
	for i := len(tokens) - 1; i >= 0; i-- {
		st := verifyToken(ctx, tokens[i], p, audiences)
		if (st != StatusOK && !allowFailed && !allowMissing) || i == 0 {
			return final(st)
		}
	}
	return StatusOK
}

// jwt is a token whose structure parsed.
type jwt struct {
	alg, kid   string
	payload    map[string]any
	payloadB64 string
	iss        string
	aud        []string
	exp, nbf   int64
}

func verifyToken(ctx *vctx, t token, p *provider, audiences []string) Status {
	j, st := parseJWT(t.value)
	if st != StatusOK {
		return st
	}
	if !t.issuerAllowed(j.iss) {
		return StatusUnknownIssuer
	}
	if p == nil {
		p = findByIssuer(ctx.providers, j.iss)
		if p == nil {
			return StatusUnknownIssuer
		}
		audiences = p.audiences
	}
	now := ctx.now.Unix()
	skew := int64(clockSkew / time.Second)
	if j.nbf > 0 && j.nbf > now+skew {
		return StatusNotYetValid
	}
	if j.exp > 0 && now > j.exp+skew {
		return StatusExpired
	}
	if !audiencesAllowed(audiences, j.aud) {
		return StatusAudienceNotAllow
	}
	if len(p.keys) == 0 {
		return StatusNoValidKeys
	}
	if st := verifySignature(t.value, j, p.keys); st != StatusOK {
		return st
	}
	good(ctx, t, j, p)
	return StatusOK
}

// findByIssuer returns the first provider (by name) of issuer iss, else the first
// without an issuer.
func findByIssuer(ps []*provider, iss string) *provider {
	for _, p := range ps {
		if p.issuer == iss {
			return p
		}
	}
	for _, p := range ps {
		if p.issuer == "" {
			return p
		}
	}
	return nil
}

// audiencesAllowed is jwt_verify_lib's CheckAudience: no configured audience allows
// any; else one of the token's must equal one configured, both without an http(s)://
// scheme and a trailing slash.
func audiencesAllowed(configured, got []string) bool {
	if len(configured) == 0 {
		return true
	}
	norm := func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
		return strings.TrimSuffix(s, "/")
	}
	for _, c := range configured {
		for _, g := range got {
			if norm(c) == norm(g) {
				return true
			}
		}
	}
	return false
}

var supportedAlgs = map[string]jose.SignatureAlgorithm{
	"RS256": jose.RS256, "RS384": jose.RS384, "RS512": jose.RS512,
	"PS256": jose.PS256, "PS384": jose.PS384, "PS512": jose.PS512,
	"ES256": jose.ES256, "ES384": jose.ES384, "ES512": jose.ES512,
	"HS256": jose.HS256, "HS384": jose.HS384, "HS512": jose.HS512,
	"EdDSA": jose.EdDSA,
}

// parseJWT checks a token's structure as jwt_verify_lib's Jwt::parseFromString, in its
// order, so a malformed token gets the same status text as from Envoy.
func parseJWT(s string) (*jwt, Status) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, StatusBadFormat
	}
	hdr, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil {
		return nil, StatusHeaderBadBase64
	}
	var h map[string]any
	if json.Unmarshal(hdr, &h) != nil || h == nil {
		return nil, StatusHeaderBadJSON
	}
	alg, ok := h["alg"].(string)
	if !ok {
		return nil, StatusHeaderBadAlg
	}
	if _, ok := supportedAlgs[alg]; !ok {
		return nil, StatusHeaderNotImplAlg
	}
	j := &jwt{alg: alg, payloadB64: parts[1]}
	if k, present := h["kid"]; present {
		if j.kid, ok = k.(string); !ok {
			return nil, StatusHeaderBadKid
		}
	}
	pl, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, StatusPayloadBadBase64
	}
	dec := json.NewDecoder(bytes.NewReader(pl))
	dec.UseNumber()
	if dec.Decode(&j.payload) != nil || j.payload == nil {
		return nil, StatusPayloadBadJSON
	}
	if v, present := j.payload["iss"]; present {
		if j.iss, ok = v.(string); !ok {
			return nil, StatusIssNotString
		}
	}
	if v, present := j.payload["sub"]; present {
		if _, ok := v.(string); !ok {
			return nil, StatusSubNotString
		}
	}
	for _, c := range []struct {
		name string
		dst  *int64
		bad  Status
	}{{"iat", nil, StatusIatNotInteger}, {"nbf", &j.nbf, StatusNbfNotInteger}, {"exp", &j.exp, StatusExpNotInteger}} {
		v, present := j.payload[c.name]
		if !present {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, c.bad
		}
		f, err := n.Float64()
		if err != nil || f != math.Trunc(f) {
			return nil, c.bad
		}
		if c.dst != nil {
			*c.dst = int64(f)
		}
	}
	switch a := j.payload["aud"].(type) {
	case nil:
	case string:
		j.aud = []string{a}
	case []any:
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return nil, StatusAudNotString
			}
			j.aud = append(j.aud, s)
		}
	default:
		return nil, StatusAudNotString
	}
	if _, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "=")); err != nil {
		return nil, StatusSignatureBase64
	}
	return j, StatusOK
}

// verifySignature is jwt_verify_lib's verifyJwtWithoutTimeChecking with go-jose doing
// the cryptography: keys whose kid or alg differ from the token's are skipped; if none
// is left the kid/alg status, else the token must verify with one of them.
func verifySignature(s string, j *jwt, keys []jose.JSONWebKey) Status {
	alg := supportedAlgs[j.alg]
	jws, err := jose.ParseSignedCompact(s, []jose.SignatureAlgorithm{alg}) // a JWT is always the compact form
	if err != nil {
		return StatusVerificationFails
	}
	tried := false
	for _, k := range keys {
		if j.kid != "" && k.KeyID != "" && k.KeyID != j.kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != j.alg {
			continue
		}
		tried = true
		if _, err := jws.Verify(k.Key); err == nil {
			return StatusOK
		}
	}
	if !tried {
		return StatusKidAlgMismatch
	}
	return StatusVerificationFails
}

// good does Envoy's handleGoodJwt: payload and claim headers, removal of the token's
// header unless forward, and the payload for the dynamic metadata.
func good(ctx *vctx, t token, j *jwt, p *provider) {
	r := ctx.r
	ctx.clearRoute = ctx.clearRoute || p.clearRoute
	if p.payloadHeader != "" {
		r.Header.Add(p.payloadHeader, j.payloadB64)
	}
	for _, ch := range p.claimHeaders {
		if v, ok := claimString(j.payload, ch[1]); ok {
			r.Header.Add(ch[0], v)
		}
	}
	if !p.forward && t.loc.header != "" {
		r.Header.Del(t.loc.header)
	}
	if p.payloadMeta != "" {
		if s, err := structpb.NewStruct(normalize(j.payload, p.spaceDelimited)); err == nil {
			ctx.payload[p.payloadMeta] = structpb.NewStructValue(s)
		}
	}
}

// claimString returns a primitive claim (a dotted path reaches nested claims) as Envoy
// writes it into a header: strings as is, whole numbers without a fraction, booleans.
func claimString(payload map[string]any, claim string) (string, bool) {
	var v any = payload
	for _, seg := range strings.Split(claim, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[seg]; !ok {
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, x != ""
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return "", false
		}
		if f >= 0 && f < math.MaxUint64 && f == math.Trunc(f) {
			return strconv.FormatUint(uint64(f), 10), true
		}
		return strconv.FormatFloat(f, 'f', 6, 64), true
	}
	return "", false
}

// normalize converts json.Numbers for structpb and splits the space-delimited claims
// (Istio: scope and permission) into lists, as normalize_payload_in_metadata.
func normalize(payload map[string]any, spaceDelimited map[string]bool) map[string]any {
	var conv func(v any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			f, _ := x.Float64()
			return f
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = conv(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = conv(e)
			}
			return out
		}
		return v
	}
	out := conv(payload).(map[string]any)
	for c := range spaceDelimited {
		if s, ok := out[c].(string); ok {
			var l []any
			for _, f := range strings.Fields(s) {
				l = append(l, f)
			}
			out[c] = l
		}
	}
	return out
}
