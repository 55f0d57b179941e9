package bootstrap

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

var statsConfigAllow = fieldcheck.Allow{
	"envoy.config.metrics.v3.StatsConfig":     {"stats_tags", "use_all_default_tags", "stats_matcher"},
	"envoy.config.metrics.v3.TagSpecifier":    {"tag_name", "regex", "fixed_value"},
	"envoy.config.metrics.v3.StatsMatcher":    {"reject_all", "exclusion_list", "inclusion_list"},
	"envoy.type.matcher.v3.ListStringMatcher": {"patterns"},
	"envoy.type.matcher.v3.StringMatcher":     {"exact", "prefix", "suffix", "safe_regex", "contains", "ignore_case"},
	"envoy.type.matcher.v3.RegexMatcher":      {"regex"},
}

// StatsConfig compiles the bootstrap's stats_config: Istio's stats_tags (custom tag
// names and regexes, so cluster stats carry cluster_name as Istio's do), whether Envoy's
// default tags apply, and the stats_matcher that decides which stats exist. nil without
// stats_config.
func StatsConfig(b *bootstrapv3.Bootstrap) (*stats.Config, error) {
	sc := b.GetStatsConfig()
	if sc == nil {
		return nil, nil
	}
	if err := statsConfigAllow.Check(sc); err != nil {
		return nil, fmt.Errorf("bootstrap: stats_config.%w", err)
	}
	c := &stats.Config{UseDefaultTags: sc.GetUseAllDefaultTags() == nil || sc.GetUseAllDefaultTags().GetValue()}
	for i, t := range sc.GetStatsTags() {
		if t.GetTagName() == "" {
			return nil, fmt.Errorf("bootstrap: stats_config.stats_tags[%d].tag_name: required", i)
		}
		r := stats.TagRule{Name: t.GetTagName()}
		switch {
		case t.GetRegex() != "":
			re, err := compileTagRegex(t.GetRegex())
			if err != nil {
				return nil, fmt.Errorf("bootstrap: stats_config.stats_tags[%d].regex: %w", i, err)
			}
			if re.NumSubexp() < 1 {
				return nil, fmt.Errorf("bootstrap: stats_config.stats_tags[%d].regex: %q has no capture group (Envoy needs one to remove from the name)", i, t.GetRegex())
			}
			r.Regex = re
		case t.GetFixedValue() != "":
			r.Fixed = t.GetFixedValue()
		default:
			// Envoy's own extractor of that name (e.g. envoy.cluster_name) is already
			// applied by default; with use_all_default_tags false it is not available here.
			return nil, fmt.Errorf("bootstrap: stats_config.stats_tags[%d]: a tag without regex or fixed_value (a default extractor by name) is not supported by meshlab proxy", i)
		}
		c.Rules = append(c.Rules, r)
	}
	if m := sc.GetStatsMatcher(); m != nil {
		inc, err := compileStatsMatcher(m.GetRejectAll(), m.GetInclusionList(), m.GetExclusionList())
		if err != nil {
			return nil, fmt.Errorf("bootstrap: stats_config.stats_matcher.%w", err)
		}
		c.Include = inc
	}
	return c, nil
}

// compileTagRegex compiles a stats_tags regex. Envoy evaluates them with std::regex
// (ECMAScript); RE2 lacks lookahead, so the one form Istio's bootstrap uses,
// "(?=\.).*?" (a non-empty rest starting with a dot), is rewritten to its equivalent
// "(?:\..*?)?"; any other lookahead is refused.
func compileTagRegex(expr string) (*regexp.Regexp, error) {
	rewritten := strings.ReplaceAll(expr, `(?=\.).*?`, `(?:\..*?)?`)
	if strings.Contains(rewritten, "(?=") || strings.Contains(rewritten, "(?!") {
		return nil, fmt.Errorf("%q: lookahead is not supported by meshlab proxy (RE2)", expr)
	}
	re, err := regexp.Compile(rewritten)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return re, nil
}

func compileStatsMatcher(rejectAll bool, inc, exc *matcherv3.ListStringMatcher) (func(string) bool, error) {
	switch {
	case rejectAll:
		return func(string) bool { return false }, nil
	case inc != nil:
		ms, err := compileMatchers(inc.GetPatterns())
		if err != nil {
			return nil, fmt.Errorf("inclusion_list.%w", err)
		}
		return func(name string) bool { return anyMatch(ms, name) }, nil
	case exc != nil:
		ms, err := compileMatchers(exc.GetPatterns())
		if err != nil {
			return nil, fmt.Errorf("exclusion_list.%w", err)
		}
		return func(name string) bool { return !anyMatch(ms, name) }, nil
	}
	return nil, errors.New("stats_matcher: one of reject_all, inclusion_list, exclusion_list is required")
}

func compileMatchers(ps []*matcherv3.StringMatcher) ([]func(string) bool, error) {
	var out []func(string) bool
	for i, p := range ps {
		fold := func(s string) string { return s }
		if p.GetIgnoreCase() {
			fold = strings.ToLower
		}
		switch m := p.GetMatchPattern().(type) {
		case *matcherv3.StringMatcher_Exact:
			v := fold(m.Exact)
			out = append(out, func(s string) bool { return fold(s) == v })
		case *matcherv3.StringMatcher_Prefix:
			v := fold(m.Prefix)
			out = append(out, func(s string) bool { return strings.HasPrefix(fold(s), v) })
		case *matcherv3.StringMatcher_Suffix:
			v := fold(m.Suffix)
			out = append(out, func(s string) bool { return strings.HasSuffix(fold(s), v) })
		case *matcherv3.StringMatcher_Contains:
			v := fold(m.Contains)
			out = append(out, func(s string) bool { return strings.Contains(fold(s), v) })
		case *matcherv3.StringMatcher_SafeRegex:
			re, err := regexp.Compile("^(?:" + m.SafeRegex.GetRegex() + ")$")
			if err != nil {
				return nil, fmt.Errorf("patterns[%d].safe_regex.regex: %w", i, err)
			}
			out = append(out, re.MatchString)
		default:
			return nil, fmt.Errorf("patterns[%d]: a match pattern is required", i)
		}
	}
	return out, nil
}

func anyMatch(ms []func(string) bool, name string) bool {
	for _, m := range ms {
		if m(name) {
			return true
		}
	}
	return false
}
