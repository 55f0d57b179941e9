package httpconn

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/fraction"
)

// matchAllow lists the RouteMatch fields and matchers the proxy implements.
var matchAllow = fieldcheck.Allow{
	"envoy.config.route.v3.RouteMatch":                {"prefix", "path", "safe_regex", "connect_matcher", "case_sensitive", "headers", "query_parameters", "runtime_fraction", "dynamic_metadata"},
	"envoy.config.route.v3.RouteMatch.ConnectMatcher": {},
	"envoy.config.route.v3.HeaderMatcher":             {"name", "string_match", "present_match", "invert_match", "exact_match", "prefix_match", "suffix_match", "contains_match", "safe_regex_match"},
	"envoy.config.route.v3.QueryParameterMatcher":     {"name", "string_match", "present_match"},
	"envoy.type.matcher.v3.StringMatcher":             {"exact", "prefix", "suffix", "safe_regex", "contains", "ignore_case"},
	"envoy.config.core.v3.RuntimeFractionalPercent":   {"default_value", "runtime_key"},
	"envoy.type.v3.FractionalPercent":                 {"numerator", "denominator"},
	// dynamic_metadata: Istio's JWT claim routes (rbac.CompileMetadataMatcher).
	"envoy.type.matcher.v3.MetadataMatcher":             {"filter", "path", "value", "invert"},
	"envoy.type.matcher.v3.MetadataMatcher.PathSegment": {"key"},
	"envoy.type.matcher.v3.ValueMatcher":                {"null_match", "string_match", "bool_match", "present_match", "list_match", "or_match"},
	"envoy.type.matcher.v3.ValueMatcher.NullMatch":      {},
	"envoy.type.matcher.v3.ListMatcher":                 {"one_of"},
	"envoy.type.matcher.v3.OrMatcher":                   {"value_matchers"},
	"envoy.type.matcher.v3.RegexMatcher":                {"regex", "google_re2"},
}

// Request is what route matching looks at.
type Request struct {
	Method    string
	Authority string
	Path      string // the raw :path, query included
	Scheme    string
	Header    http.Header
	// Metadata is the request's dynamic metadata by filter name, which a route's
	// dynamic_metadata matchers read: empty when the route is first selected, before
	// the HTTP filters run; the JWT filter's payload when it cleared the route cache.
	Metadata map[string]*structpb.Struct
}

// stringMatcher is a compiled envoy.type.matcher.v3.StringMatcher.
type stringMatcher struct {
	kind       string // exact, prefix, suffix, contains, regex
	value      string
	re         *regexp.Regexp
	ignoreCase bool
}

func compileStringMatcher(m *matcherv3.StringMatcher) (*stringMatcher, error) {
	sm := &stringMatcher{ignoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		sm.kind, sm.value = "exact", p.Exact
	case *matcherv3.StringMatcher_Prefix:
		sm.kind, sm.value = "prefix", p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		sm.kind, sm.value = "suffix", p.Suffix
	case *matcherv3.StringMatcher_Contains:
		sm.kind, sm.value = "contains", p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := compileRegex(p.SafeRegex.GetRegex())
		if err != nil {
			return nil, fmt.Errorf("safe_regex.regex: %w", err)
		}
		sm.kind, sm.re = "regex", re
	default:
		return nil, errors.New("match_pattern: unsupported string matcher")
	}
	if sm.ignoreCase {
		sm.value = strings.ToLower(sm.value)
	}
	return sm, nil
}

// compileRegex compiles an RE2 regex that must match the whole input, as Envoy's
// safe_regex matchers do.
func compileRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

func (m *stringMatcher) match(v string) bool {
	if m.kind == "regex" {
		return m.re.MatchString(v) // Envoy ignores ignore_case for regexes
	}
	if m.ignoreCase {
		v = strings.ToLower(v)
	}
	switch m.kind {
	case "exact":
		return v == m.value
	case "prefix":
		return strings.HasPrefix(v, m.value)
	case "suffix":
		return strings.HasSuffix(v, m.value)
	}
	return strings.Contains(v, m.value)
}

// headerMatcher is a compiled HeaderMatcher.
type headerMatcher struct {
	name    string
	str     *stringMatcher // nil for present_match
	present bool
	invert  bool
}

func compileHeaderMatcher(h *routev3.HeaderMatcher) (*headerMatcher, error) {
	hm := &headerMatcher{name: strings.ToLower(h.GetName()), invert: h.GetInvertMatch()}
	var sm *matcherv3.StringMatcher
	//nolint:staticcheck // reads the deprecated exact/prefix/suffix/contains/safe_regex matchers, which Envoy still honours
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_StringMatch:
		sm = s.StringMatch
	case *routev3.HeaderMatcher_PresentMatch:
		hm.present = s.PresentMatch
		return hm, nil
	case *routev3.HeaderMatcher_ExactMatch:
		sm = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s.ExactMatch}}
	case *routev3.HeaderMatcher_PrefixMatch:
		sm = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s.PrefixMatch}}
	case *routev3.HeaderMatcher_SuffixMatch:
		sm = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: s.SuffixMatch}}
	case *routev3.HeaderMatcher_ContainsMatch:
		sm = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: s.ContainsMatch}}
	case *routev3.HeaderMatcher_SafeRegexMatch:
		sm = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: s.SafeRegexMatch}}
	case nil:
		// No specifier: Envoy matches on presence.
		hm.present = true
		return hm, nil
	default:
		return nil, errors.New("header_match_specifier: unsupported matcher")
	}
	m, err := compileStringMatcher(sm)
	if err != nil {
		return nil, fmt.Errorf("string_match.%w", err)
	}
	hm.str = m
	return hm, nil
}

// headerValue returns all values of a header joined by ",", as Envoy matches them, with
// the pseudo-headers :method, :authority, :path and :scheme.
func (r *Request) headerValue(name string) (string, bool) {
	switch name {
	case ":method":
		return r.Method, true
	case ":authority", "host":
		return r.Authority, true
	case ":path":
		return r.Path, true
	case ":scheme":
		return r.Scheme, true
	}
	vs, ok := r.Header[http.CanonicalHeaderKey(name)]
	if !ok {
		return "", false
	}
	return strings.Join(vs, ","), true
}

// match follows Envoy's HeaderUtility::matchHeaders: a missing header matches only a
// present_match false (or, inverted, a present_match true).
func (m *headerMatcher) match(r *Request) bool {
	v, ok := r.headerValue(m.name)
	if !ok {
		if m.invert {
			return m.str == nil && m.present
		}
		return m.str == nil && !m.present
	}
	var res bool
	if m.str == nil {
		res = m.present
	} else {
		res = m.str.match(v)
	}
	return res != m.invert
}

// queryMatcher is a compiled QueryParameterMatcher.
type queryMatcher struct {
	name string
	str  *stringMatcher // nil: present_match
}

func compileQueryMatcher(q *routev3.QueryParameterMatcher) (*queryMatcher, error) {
	qm := &queryMatcher{name: q.GetName()}
	if sm := q.GetStringMatch(); sm != nil {
		m, err := compileStringMatcher(sm)
		if err != nil {
			return nil, fmt.Errorf("string_match.%w", err)
		}
		qm.str = m
	}
	return qm, nil
}

func (m *queryMatcher) match(q url.Values) bool {
	vs, ok := q[m.name]
	if !ok {
		return false
	}
	if m.str == nil {
		return true
	}
	return m.str.match(vs[0])
}

func runtimeFraction(p *corev3.RuntimeFractionalPercent) *fraction.Fraction {
	if p == nil {
		return nil
	}
	// No runtime layer can override the key here, so the default value applies.
	f := fraction.From(p.GetDefaultValue())
	return &f
}
