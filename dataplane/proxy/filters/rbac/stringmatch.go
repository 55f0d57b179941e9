package rbac

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

type stringMatch func(string) bool

// compileStringMatcher compiles a StringMatcher: exact, prefix, suffix, contains (all
// honouring ignore_case) or safe_regex, which must match the whole value.
func compileStringMatcher(m *matcherv3.StringMatcher) (stringMatch, error) {
	fold := m.GetIgnoreCase()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := norm(p.Exact)
		return func(v string) bool { return norm(v) == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := norm(p.Prefix)
		return func(v string) bool { return strings.HasPrefix(norm(v), want) }, nil
	case *matcherv3.StringMatcher_Suffix:
		want := norm(p.Suffix)
		return func(v string) bool { return strings.HasSuffix(norm(v), want) }, nil
	case *matcherv3.StringMatcher_Contains:
		want := norm(p.Contains)
		return func(v string) bool { return strings.Contains(norm(v), want) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile(`^(?:` + p.SafeRegex.GetRegex() + `)$`)
		if err != nil {
			return nil, fmt.Errorf("safe_regex.regex: %w", err)
		}
		return re.MatchString, nil
	}
	return nil, errors.New("match_pattern: unsupported string matcher")
}

// compileHeader compiles a HeaderMatcher as Envoy's HeaderUtility::matchHeaders: the
// header's values joined by ","; a missing header matches only present_match: false
// (or, inverted, present_match: true).
func compileHeader(h *routev3.HeaderMatcher) (matchFunc, error) {
	name, invert := strings.ToLower(h.GetName()), h.GetInvertMatch()
	switch spec := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		present := spec.PresentMatch
		return func(in *Input) bool {
			_, ok := in.header(name)
			if !ok {
				return present == invert
			}
			return present != invert
		}, nil
	case *routev3.HeaderMatcher_StringMatch:
		m, err := compileStringMatcher(spec.StringMatch)
		if err != nil {
			return nil, fmt.Errorf("string_match.%w", err)
		}
		return func(in *Input) bool {
			v, ok := in.header(name)
			if !ok {
				return false
			}
			return m(v) != invert
		}, nil
	}
	return nil, errors.New("header_match_specifier: only string_match and present_match are supported by meshlab proxy")
}
