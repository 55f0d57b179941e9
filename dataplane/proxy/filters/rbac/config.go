package rbac

import (
	"errors"
	"fmt"
	"strings"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Filter names and their config types.
const (
	HTTPFilterName    = "envoy.filters.http.rbac"
	NetworkFilterName = "envoy.filters.network.rbac"
	HTTPConfigType    = "envoy.extensions.filters.http.rbac.v3.RBAC"
	NetworkConfigType = "envoy.extensions.filters.network.rbac.v3.RBAC"
)

// DeniedBody is the body of the HTTP filter's 403 local reply.
const DeniedBody = "RBAC: access denied"

var rulesAllow = fieldcheck.Allow{
	"envoy.config.rbac.v3.RBAC":           {"action", "policies"},
	"envoy.config.rbac.v3.Policy":         {"permissions", "principals"},
	"envoy.config.rbac.v3.Permission":     {"any", "and_rules", "or_rules", "not_rule", "header", "url_path", "destination_ip", "destination_port", "destination_port_range", "metadata"},
	"envoy.config.rbac.v3.Permission.Set": {"rules"},
	"envoy.config.rbac.v3.Principal":      {"any", "and_ids", "or_ids", "not_id", "authenticated", "source_ip", "direct_remote_ip", "remote_ip", "header", "url_path", "metadata", "filter_state"},
	// filter_state: a string match on the object's string form (istiod's waypoint
	// principals, io.istio.peer_principal); other matchers are refused.
	"envoy.type.matcher.v3.FilterStateMatcher":          {"key", "string_match"},
	"envoy.type.matcher.v3.MetadataMatcher":             {"filter", "path", "value", "invert"},
	"envoy.type.matcher.v3.MetadataMatcher.PathSegment": {"key"},
	"envoy.type.matcher.v3.ValueMatcher":                {"null_match", "string_match", "bool_match", "present_match", "list_match", "or_match"},
	"envoy.type.matcher.v3.ValueMatcher.NullMatch":      {},
	"envoy.type.matcher.v3.ListMatcher":                 {"one_of"},
	"envoy.type.matcher.v3.OrMatcher":                   {"value_matchers"},
	"envoy.config.rbac.v3.Principal.Set":                {"ids"},
	"envoy.config.rbac.v3.Principal.Authenticated":      {"principal_name"},
	"envoy.config.route.v3.HeaderMatcher":               {"name", "string_match", "present_match", "invert_match"},
	"envoy.type.matcher.v3.PathMatcher":                 {"path"},
	"envoy.type.matcher.v3.StringMatcher":               {"exact", "prefix", "suffix", "safe_regex", "contains", "ignore_case"},
	"envoy.type.matcher.v3.RegexMatcher":                {"regex", "google_re2"},
	"envoy.config.core.v3.CidrRange":                    {"address_prefix", "prefix_len"},
	"envoy.type.v3.Int32Range":                          {"start", "end"},
}

var httpAllow = fieldcheck.Allow{
	HTTPConfigType: {"rules", "rules_stat_prefix", "shadow_rules", "shadow_rules_stat_prefix"},
}.Merge(rulesAllow)

var networkAllow = fieldcheck.Allow{
	NetworkConfigType: {"rules", "stat_prefix", "enforcement_type", "shadow_rules", "shadow_rules_stat_prefix"},
}.Merge(rulesAllow)

// Rules are one filter's two engines: the enforced rules, whose decision stands, and the
// shadow rules, evaluated and reported (stats, dynamic metadata, rbac debug log) but
// never enforced, which is how istiod sends a dry-run AuthorizationPolicy. Their stat
// prefixes name their stats and dynamic metadata keys.
type Rules struct {
	Engine *Engine // rules; nil: no rules, everything is allowed
	Shadow *Engine // shadow_rules; nil: none
	// RulesStatPrefix and ShadowRulesStatPrefix are rules_stat_prefix and
	// shadow_rules_stat_prefix (the network filter has no rules_stat_prefix).
	RulesStatPrefix, ShadowRulesStatPrefix string
}

// HTTPConfig is a compiled envoy.filters.http.rbac.
type HTTPConfig struct {
	Rules
}

// NetworkConfig is a compiled envoy.filters.network.rbac.
type NetworkConfig struct {
	Rules
	StatPrefix string // e.g. "tcp.": stats <stat_prefix>rbac.allowed
}

// CompileHTTP validates and compiles an HTTP RBAC typed_config. Fields the proxy does
// not implement (matcher, conditions, track_per_rule_stats, the LOG action...) are
// refused.
func CompileHTTP(a *anypb.Any) (*HTTPConfig, error) {
	r, rules, err := compile[httprbacv3.RBAC](a, httpAllow)
	if err != nil {
		return nil, err
	}
	rules.RulesStatPrefix = r.GetRulesStatPrefix()
	return &HTTPConfig{Rules: rules}, nil
}

// CompileNetwork validates and compiles a network RBAC typed_config.
func CompileNetwork(a *anypb.Any) (*NetworkConfig, error) {
	r, rules, err := compile[netrbacv3.RBAC](a, networkAllow)
	if err != nil {
		return nil, err
	}
	return &NetworkConfig{Rules: rules, StatPrefix: r.GetStatPrefix()}, nil
}

// compile unpacks a typed_config of either RBAC filter (HTTP or network), validates it,
// refuses the fields allow does not list and compiles its rules and shadow rules.
func compile[T any, M interface {
	*T
	proto.Message
	ValidateAll() error
	GetRules() *rbacv3.RBAC
	GetShadowRules() *rbacv3.RBAC
	GetShadowRulesStatPrefix() string
}](a *anypb.Any, allow fieldcheck.Allow) (M, Rules, error) {
	r := M(new(T))
	if err := a.UnmarshalTo(r); err != nil {
		return nil, Rules{}, fmt.Errorf("unpack RBAC: %w", err)
	}
	if err := r.ValidateAll(); err != nil {
		return nil, Rules{}, err
	}
	if err := allow.Check(r); err != nil {
		return nil, Rules{}, err
	}
	e, err := compileRules(r.GetRules(), "rules")
	if err != nil {
		return nil, Rules{}, err
	}
	shadow, err := compileRules(r.GetShadowRules(), "shadow_rules")
	if err != nil {
		return nil, Rules{}, err
	}
	return r, Rules{Engine: e, Shadow: shadow, ShadowRulesStatPrefix: r.GetShadowRulesStatPrefix()}, nil
}

// compileRules compiles the RBAC of field (rules or shadow_rules); nil for none.
func compileRules(r *rbacv3.RBAC, field string) (*Engine, error) {
	if r == nil {
		return nil, nil
	}
	e := &Engine{}
	switch r.GetAction() {
	case rbacv3.RBAC_ALLOW:
		e.Action = ActionAllow
	case rbacv3.RBAC_DENY:
		e.Action = ActionDeny
	default:
		return nil, fmt.Errorf("%s.action: %s is not supported by meshlab proxy", field, r.GetAction())
	}
	for name, p := range r.GetPolicies() {
		perms, err := compilePermissions(p.GetPermissions(), "permissions")
		if err != nil {
			return nil, fmt.Errorf("%s.policies[%s].%w", field, name, fixList(err))
		}
		princs, err := compilePrincipals(p.GetPrincipals(), "principals")
		if err != nil {
			return nil, fmt.Errorf("%s.policies[%s].%w", field, name, fixList(err))
		}
		pol := Policy{Name: name}
		for _, m := range perms {
			pol.Permissions = append(pol.Permissions, m)
		}
		for _, m := range princs {
			pol.Principals = append(pol.Principals, m)
		}
		e.Policies = append(e.Policies, pol)
	}
	sortPolicies(e.Policies)
	return e, nil
}

// fixList turns "permissions.rules[0]" into "permissions[0]" for top-level lists.
func fixList(err error) error {
	s := err.Error()
	for _, f := range []string{"permissions", "principals"} {
		for _, inner := range []string{".rules[", ".ids["} {
			if strings.HasPrefix(s, f+inner) {
				return errors.New(f + "[" + s[len(f+inner):])
			}
		}
	}
	return err
}

// Stats are a filter's rbac.allowed and rbac.denied counters, and its shadow rules'
// rbac.<shadow prefix>.shadow_allowed and shadow_denied. Envoy creates all four with the
// filter, shadow rules or not.
type Stats struct {
	Allowed, Denied             *stats.Stat
	ShadowAllowed, ShadowDenied *stats.Stat
}

// HTTPStats returns the stats of an HTTP RBAC filter in its HCM's scope
// ("http.<stat_prefix>."): http.<stat_prefix>.rbac.<rules_stat_prefix>allowed, as
// Envoy's Filters::Common::RBAC::generateStats.
func (c *HTTPConfig) HTTPStats(hcm stats.Scope) Stats {
	return newStats(hcm.Scope("rbac", ""), c.RulesStatPrefix, c.ShadowRulesStatPrefix)
}

// NetworkStats returns the stats of a network RBAC filter: <stat_prefix>rbac.allowed
// and <stat_prefix>rbac.denied (stat_prefix "tcp." gives tcp.rbac.allowed).
func (c *NetworkConfig) NetworkStats(store *stats.Store) Stats {
	sc := store.Root()
	for _, seg := range strings.Split(strings.TrimSuffix(c.StatPrefix, "."), ".") {
		if seg != "" {
			sc = sc.Scope(seg, "")
		}
	}
	return newStats(sc.Scope("rbac", ""), "", c.ShadowRulesStatPrefix)
}

// newStats names the counters as Envoy's generateStats: each prefix joined to "rbac."
// and then to the counter's name with statPrefixJoin, which puts a "." between them
// unless the prefix ends with one (so shadow prefix "istio_dry_run_deny_" gives
// rbac.istio_dry_run_deny_.shadow_denied, the name Istio's stats_tags take apart).
func newStats(sc stats.Scope, rulesPrefix, shadowPrefix string) Stats {
	join := func(prefix, name string) string {
		if prefix != "" && !strings.HasSuffix(prefix, ".") {
			prefix += "."
		}
		return prefix + name
	}
	return Stats{
		Allowed: sc.Counter(join(rulesPrefix, "allowed")), Denied: sc.Counter(join(rulesPrefix, "denied")),
		ShadowAllowed: sc.Counter(join(shadowPrefix, "shadow_allowed")), ShadowDenied: sc.Counter(join(shadowPrefix, "shadow_denied")),
	}
}
