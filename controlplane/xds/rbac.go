package xds

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacpb "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httprbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netrbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
	extensions "istio.io/api/extensions/v1alpha1"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// NetworkRBACStatPrefix is the stat_prefix of every network RBAC filter, as Istio's.
const NetworkRBACStatPrefix = "tcp."

// Shadow rules' stat prefixes, as istiod's authz builder names them by the shadow rules'
// action (authz model's RBACShadowRules{Allow,Deny}StatPrefix): a filter without
// dry-run policies has nil shadow rules, whose action reads as ALLOW, so it carries the
// allow prefix (builder.shadowRuleStatPrefix).
const (
	shadowAllowStatPrefix = "istio_dry_run_allow_"
	shadowDenyStatPrefix  = "istio_dry_run_deny_"
)

// ruleSet is the RBAC config of one action on a chain: the enforced rules of its
// policies and the shadow rules of its dry-run ones (each nil when no policy of that
// kind applies), as istiod's builder makes one filter of both.
type ruleSet struct {
	rules, shadow *rbacpb.RBAC
}

func (r ruleSet) empty() bool { return r.rules == nil && r.shadow == nil }

// shadowStatPrefix is builder.shadowRuleStatPrefix: the prefix of the shadow rules'
// action.
func (r ruleSet) shadowStatPrefix() string {
	if r.shadow.GetAction() == rbacpb.RBAC_DENY {
		return shadowDenyStatPrefix
	}
	return shadowAllowStatPrefix
}

// sets returns the rule sets' RBACs, enforced and shadow, that are not nil.
func (r ruleSet) sets() []*rbacpb.RBAC {
	var out []*rbacpb.RBAC
	for _, s := range []*rbacpb.RBAC{r.rules, r.shadow} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// authz is the RBAC config of one pod's inbound chains: the DENY and ALLOW rule sets.
type authz struct {
	deny, allow ruleSet
	// jwt is the envoy.filters.http.jwt_authn filter of an HTTP chain (nil: no
	// RequestAuthentication selects the pod), which runs before the RBAC filters.
	jwt *hcm.HttpFilter
	// ext are the chain's TrafficExtension filters (trafficextension.go), placed by
	// phase around the authn and authz filters.
	ext extensionFilters
}

// authzFor translates the ALLOW and DENY AuthorizationPolicies selecting pod (in model
// order) into RBAC rules for an HTTP chain, or a TCP chain when forTCP, as Istio's
// authz builder: one policy "ns[<ns>]-policy[<name>]-rule[<i>]" per rule. On TCP a rule
// using HTTP-only fields (methods, paths, request headers) is dropped from an ALLOW
// policy and keeps only its TCP fields in a DENY policy. AUDIT and CUSTOM policies are
// ignored.
func authzFor(m *model.Model, pod *model.Pod, forTCP bool) authz {
	root := m.Mesh.Root()
	out := policyAuthz(m, func(ap *model.IstioConfig[*security.AuthorizationPolicy]) bool { return policyAttaches(ap, root, pod) }, forTCP)
	if !forTCP {
		// The config loader validated every jwtRule, so building the filter cannot fail.
		out.jwt, _ = jwtFilter(m, pod)
	}
	return out
}

// policyAuthz translates the ALLOW and DENY AuthorizationPolicies that apply (in model
// order) into RBAC rules for an HTTP chain, or a TCP chain when forTCP (see authzFor):
// a dry-run policy's rules (istio.io/dry-run: "true") into the shadow rules of its
// action's set, as istiod's builder.
func policyAuthz(m *model.Model, applies func(*model.IstioConfig[*security.AuthorizationPolicy]) bool, forTCP bool) authz {
	var out authz
	tds := m.Mesh.TrustDomains()
	for _, ap := range m.Istio.AuthorizationPolicies {
		if ap == nil || ap.Spec == nil || !applies(ap) {
			continue
		}
		var rs *ruleSet
		action := rbacpb.RBAC_ALLOW
		switch ap.Spec.GetAction() {
		case security.AuthorizationPolicy_ALLOW:
			rs = &out.allow
		case security.AuthorizationPolicy_DENY:
			rs, action = &out.deny, rbacpb.RBAC_DENY
		default:
			continue
		}
		set := &rs.rules
		if ap.DryRun() {
			set = &rs.shadow
		}
		if *set == nil {
			*set = &rbacpb.RBAC{Action: action, Policies: map[string]*rbacpb.Policy{}}
		}
		for i, r := range ap.Spec.GetRules() {
			if p, ok := rbacPolicy(r, forTCP, action, tds); ok {
				(*set).Policies[fmt.Sprintf("ns[%s]-policy[%s]-rule[%d]", ap.Namespace, ap.Name, i)] = p
			}
		}
	}
	return out
}

// policyAttaches reports whether AuthorizationPolicy ap applies to pod's own proxy (a
// sidecar or a gateway; a waypoint's are waypointAuthz's), as istiod's policy matcher: a
// policy with targets only to the pods of the Gateway it names (a sidecar never takes
// one), any other by its selector.
func policyAttaches(ap *model.IstioConfig[*security.AuthorizationPolicy], root string, pod *model.Pod) bool {
	if model.HasTargets(ap.Spec) {
		gw, ok := pod.Labels[model.GatewayAPINameLabel]
		return ok && ap.Namespace == pod.Namespace && model.TargetsGateway(ap.Spec, pod.Namespace, gw)
	}
	return PolicySelects(ap.Namespace, ap.Spec.GetSelector(), root, pod)
}

// field is one attribute of a rule with its values and notValues; httpOnly fields never
// match on TCP.
type field struct {
	values, notValues []string
	httpOnly          bool
}

// rbacPolicy translates one rule, as Istio's authz model: every from entry is one
// principal (and_ids of its fields and the when conditions), every to entry one
// permission (and_rules of its fields); each field ORs its values and NOTs the OR of its
// notValues. ok is false when the rule is dropped (an HTTP-only field of an ALLOW rule
// on TCP). Principals name the mesh's trust domains tds as istiod migrates them
// (migratePrincipals).
func rbacPolicy(r *security.Rule, forTCP bool, action rbacpb.RBAC_Action, tds []string) (*rbacpb.Policy, bool) {
	var when []principalField
	for _, c := range r.GetWhen() {
		when = append(when, conditionField(c))
	}
	p := &rbacpb.Policy{}
	froms := r.GetFrom()
	if len(froms) == 0 {
		froms = []*security.Rule_From{{}}
	}
	for _, f := range froms {
		s := f.GetSource()
		// Istio's order: principals, requestPrincipals, namespaces, remoteIpBlocks,
		// ipBlocks, then the when conditions.
		fields := []principalField{
			{field: field{migrateAll(tds, s.GetPrincipals()), migrateAll(tds, s.GetNotPrincipals()), false}, match: principalID},
			{field: field{s.GetRequestPrincipals(), s.GetNotRequestPrincipals(), true}, extended: requestPrincipalID},
			{field: field{s.GetNamespaces(), s.GetNotNamespaces(), false}, match: namespaceID},
			{field: field{s.GetRemoteIpBlocks(), s.GetNotRemoteIpBlocks(), false}, match: remoteIPID},
			{field: field{s.GetIpBlocks(), s.GetNotIpBlocks(), false}, match: sourceIPID},
		}
		ids, ok := andFields(principals, append(fields, when...), forTCP, action)
		if !ok {
			return nil, false
		}
		p.Principals = append(p.Principals, ids)
	}
	tos := r.GetTo()
	if len(tos) == 0 {
		tos = []*security.Rule_To{{}}
	}
	for _, t := range tos {
		o := t.GetOperation()
		fields := []permissionField{
			{field: field{o.GetPorts(), o.GetNotPorts(), false}, match: portRule},
			{field: field{o.GetPaths(), o.GetNotPaths(), true}, match: pathRule},
			{field: field{o.GetMethods(), o.GetNotMethods(), true}, match: methodRule},
		}
		rules, ok := andFields(permissions, fields, forTCP, action)
		if !ok {
			return nil, false
		}
		p.Permissions = append(p.Permissions, rules)
	}
	return p, true
}

// matcherField is one attribute of a rule and how one of its values becomes a matcher
// (a Principal or a Permission).
type matcherField[T any] struct {
	field
	match func(string) T
	// extended, when set, makes one matcher of all values at once (Istio's extended
	// generators: request principals and JWT claims), instead of an OR of match.
	extended func([]string) T
}

type (
	principalField  = matcherField[*rbacpb.Principal]
	permissionField = matcherField[*rbacpb.Permission]
)

// matcherSet builds the set matchers of one RBAC matcher type.
type matcherSet[T any] struct {
	and, or func([]T) T
	not     func(T) T
	any     func() T
}

var principals = matcherSet[*rbacpb.Principal]{
	and: func(ids []*rbacpb.Principal) *rbacpb.Principal {
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_AndIds{AndIds: &rbacpb.Principal_Set{Ids: ids}}}
	},
	or: func(ids []*rbacpb.Principal) *rbacpb.Principal {
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_OrIds{OrIds: &rbacpb.Principal_Set{Ids: ids}}}
	},
	not: func(id *rbacpb.Principal) *rbacpb.Principal {
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_NotId{NotId: id}}
	},
	any: func() *rbacpb.Principal { return &rbacpb.Principal{Identifier: &rbacpb.Principal_Any{Any: true}} },
}

var permissions = matcherSet[*rbacpb.Permission]{
	and: func(rules []*rbacpb.Permission) *rbacpb.Permission {
		return &rbacpb.Permission{Rule: &rbacpb.Permission_AndRules{AndRules: &rbacpb.Permission_Set{Rules: rules}}}
	},
	or: func(rules []*rbacpb.Permission) *rbacpb.Permission {
		return &rbacpb.Permission{Rule: &rbacpb.Permission_OrRules{OrRules: &rbacpb.Permission_Set{Rules: rules}}}
	},
	not: func(rule *rbacpb.Permission) *rbacpb.Permission {
		return &rbacpb.Permission{Rule: &rbacpb.Permission_NotRule{NotRule: rule}}
	},
	any: func() *rbacpb.Permission { return &rbacpb.Permission{Rule: &rbacpb.Permission_Any{Any: true}} },
}

// andFields ANDs the fields that have values (each the OR of its values, and the NOT of
// the OR of its notValues); {any: true} when none has. On TCP an HTTP-only field with
// values drops the whole rule of an ALLOW policy (ok false) and is skipped in a DENY one.
func andFields[T any](set matcherSet[T], fields []matcherField[T], forTCP bool, action rbacpb.RBAC_Action) (T, bool) {
	var and []T
	for _, f := range fields {
		if forTCP && f.httpOnly && len(f.values)+len(f.notValues) > 0 {
			if action == rbacpb.RBAC_ALLOW {
				var none T
				return none, false
			}
			continue
		}
		switch {
		case f.extended != nil:
			if len(f.values) > 0 {
				and = append(and, f.extended(f.values))
			}
			if len(f.notValues) > 0 {
				and = append(and, set.not(f.extended(f.notValues)))
			}
			continue
		}
		if len(f.values) > 0 {
			and = append(and, orValues(set, f.values, f.match))
		}
		if len(f.notValues) > 0 {
			and = append(and, set.not(orValues(set, f.notValues, f.match)))
		}
	}
	if len(and) == 0 {
		and = []T{set.any()}
	}
	return set.and(and), true
}

func orValues[T any](set matcherSet[T], values []string, match func(string) T) T {
	or := make([]T, 0, len(values))
	for _, v := range values {
		or = append(or, match(v))
	}
	return set.or(or)
}

// principalID matches a peer's SPIFFE ID: "*" any, "x*" by prefix, "*x" by suffix, else
// exactly; Istio prefixes "spiffe://" to the configured principal.
func principalID(v string) *rbacpb.Principal {
	return authenticated(policyStringMatcher(v, "spiffe://"))
}

// namespaceID matches a peer whose SPIFFE ID is in namespace v ("*" in v matches any run).
func namespaceID(v string) *rbacpb.Principal {
	re := ".*/ns/" + strings.ReplaceAll(v, "*", ".*") + "/.*"
	return authenticated(&matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: re}}})
}

func authenticated(m *matcher.StringMatcher) *rbacpb.Principal {
	return &rbacpb.Principal{Identifier: &rbacpb.Principal_Authenticated_{Authenticated: &rbacpb.Principal_Authenticated{PrincipalName: m}}}
}

func portRule(v string) *rbacpb.Permission {
	n, _ := strconv.ParseUint(v, 10, 32) // the config loader validates ports
	return &rbacpb.Permission{Rule: &rbacpb.Permission_DestinationPort{DestinationPort: uint32(n)}}
}

func pathRule(v string) *rbacpb.Permission {
	return &rbacpb.Permission{Rule: &rbacpb.Permission_UrlPath{UrlPath: &matcher.PathMatcher{
		Rule: &matcher.PathMatcher_Path{Path: policyStringMatcher(v, "")},
	}}}
}

func methodRule(v string) *rbacpb.Permission {
	return &rbacpb.Permission{Rule: &rbacpb.Permission_Header{Header: policyHeaderMatcher(":method", v)}}
}

// policyStringMatcher returns Istio's matcher of a policy value: "*" any non-empty string, "x*"
// prefix, "*x" suffix, else exact, with prefix prepended where the match is anchored at
// the start.
func policyStringMatcher(v, prefix string) *matcher.StringMatcher {
	switch {
	case v == "*":
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: ".+"}}}
	case strings.HasPrefix(v, "*"):
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: strings.TrimPrefix(v, "*")}}
	case strings.HasSuffix(v, "*"):
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: prefix + strings.TrimSuffix(v, "*")}}
	}
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: prefix + v}}
}

// policyHeaderMatcher is Istio's header matcher of a policy value: "*" present, else as
// policyStringMatcher.
func policyHeaderMatcher(name, v string) *route.HeaderMatcher {
	if v == "*" {
		return &route.HeaderMatcher{Name: name, HeaderMatchSpecifier: &route.HeaderMatcher_PresentMatch{PresentMatch: true}}
	}
	return &route.HeaderMatcher{Name: name, HeaderMatchSpecifier: &route.HeaderMatcher_StringMatch{StringMatch: policyStringMatcher(v, "")}}
}

// httpFilters returns the JWT filter of a, then its HTTP RBAC filters, DENY before
// ALLOW, as Istio orders authn before authz. Each filter carries its action's enforced
// rules and dry-run shadow rules. TrafficExtension filters go where istiod puts their
// phase: AUTHN before the JWT filter, AUTHZ before the RBAC filters, STATS and then
// unspecified after them.
func (a authz) httpFilters() ([]*hcm.HttpFilter, error) {
	var out []*hcm.HttpFilter
	out = append(out, a.ext[extensions.TrafficExtension_AUTHN]...)
	if a.jwt != nil {
		out = append(out, a.jwt)
	}
	out = append(out, a.ext[extensions.TrafficExtension_AUTHZ]...)
	for _, rs := range []ruleSet{a.deny, a.allow} {
		if rs.empty() {
			continue
		}
		cfg, err := typed(&httprbac.RBAC{Rules: rs.rules, ShadowRules: rs.shadow, ShadowRulesStatPrefix: rs.shadowStatPrefix()})
		if err != nil {
			return nil, fmt.Errorf("build http rbac: %w", err)
		}
		out = append(out, &hcm.HttpFilter{Name: wellknown.HTTPRoleBasedAccessControl, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg}})
	}
	out = append(out, a.ext[extensions.TrafficExtension_STATS]...)
	out = append(out, a.ext[extensions.TrafficExtension_UNSPECIFIED]...)
	return out, nil
}

// networkFilters returns the network RBAC filters of a, DENY before ALLOW.
func (a authz) networkFilters() ([]*listener.Filter, error) {
	var out []*listener.Filter
	for _, rs := range []ruleSet{a.deny, a.allow} {
		if rs.empty() {
			continue
		}
		cfg, err := typed(&netrbac.RBAC{Rules: rs.rules, ShadowRules: rs.shadow, StatPrefix: NetworkRBACStatPrefix, ShadowRulesStatPrefix: rs.shadowStatPrefix()})
		if err != nil {
			return nil, fmt.Errorf("build network rbac: %w", err)
		}
		out = append(out, &listener.Filter{Name: wellknown.RoleBasedAccessControl, ConfigType: &listener.Filter_TypedConfig{TypedConfig: cfg}})
	}
	return out, nil
}

// conditionField translates one when condition as Istio's authz model: request
// headers, JWT claims, request principal, audiences and presenter are HTTP-only
// principals; source.ip and remote.ip match the connection's peer and the request's
// client address.
func conditionField(c *security.Condition) principalField {
	f := field{c.GetValues(), c.GetNotValues(), true}
	k := c.GetKey()
	switch {
	case strings.HasPrefix(k, "request.headers["):
		name := strings.TrimSuffix(strings.TrimPrefix(k, "request.headers["), "]")
		return principalField{field: f, match: func(v string) *rbacpb.Principal {
			return &rbacpb.Principal{Identifier: &rbacpb.Principal_Header{Header: policyHeaderMatcher(name, v)}}
		}}
	case strings.HasPrefix(k, "request.auth.claims["):
		claims := strings.Split(strings.TrimSuffix(strings.TrimPrefix(k, "request.auth.claims["), "]"), "][")
		return principalField{field: f, extended: func(vs []string) *rbacpb.Principal { return claimID(claims, vs) }}
	case k == "request.auth.principal":
		return principalField{field: f, extended: requestPrincipalID}
	case k == "request.auth.audiences":
		return principalField{field: f, extended: func(vs []string) *rbacpb.Principal { return claimID([]string{"aud"}, vs) }}
	case k == "request.auth.presenter":
		return principalField{field: f, extended: func(vs []string) *rbacpb.Principal { return claimID([]string{"azp"}, vs) }}
	case k == "source.ip":
		f.httpOnly = false
		return principalField{field: f, match: sourceIPID}
	case k == "remote.ip":
		f.httpOnly = false
		return principalField{field: f, match: remoteIPID}
	}
	// The config loader refuses every other key; an unknown one matches nothing.
	return principalField{field: f, match: func(string) *rbacpb.Principal { return principals.not(principals.any()) }}
}

// cidrOf is Istio's AddrStrToCidrRange: an address is a /32 (/128), a range keeps the
// address as written. The config loader validated the value.
func cidrOf(v string) *core.CidrRange {
	var pfx netip.Prefix
	if strings.Contains(v, "/") {
		pfx, _ = netip.ParsePrefix(v)
	} else {
		a, _ := netip.ParseAddr(v)
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	return &core.CidrRange{AddressPrefix: pfx.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(pfx.Bits()))}
}

// sourceIPID is ipBlocks and source.ip: the downstream connection's peer.
func sourceIPID(v string) *rbacpb.Principal {
	return &rbacpb.Principal{Identifier: &rbacpb.Principal_DirectRemoteIp{DirectRemoteIp: cidrOf(v)}}
}

// remoteIPID is remoteIpBlocks and remote.ip: the client address from
// x-forwarded-for (or the peer).
func remoteIPID(v string) *rbacpb.Principal {
	return &rbacpb.Principal{Identifier: &rbacpb.Principal_RemoteIp{RemoteIp: cidrOf(v)}}
}

// jwtClaimMatcher matches the JWT payload's value at claims (Istio's
// MetadataValueMatcherForJWTClaim shape, without the list form).
func jwtClaimMatcher(claims []string, v *matcher.ValueMatcher) *rbacpb.Principal {
	path := []*matcher.MetadataMatcher_PathSegment{{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: JWTPayloadKey}}}
	for _, c := range claims {
		path = append(path, &matcher.MetadataMatcher_PathSegment{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: c}})
	}
	//nolint:staticcheck // Principal.metadata is deprecated (for sourced_metadata), and Istio still sends it for claims.
	return &rbacpb.Principal{Identifier: &rbacpb.Principal_Metadata{Metadata: &matcher.MetadataMatcher{Filter: JWTFilterName, Path: path, Value: v}}}
}

func stringValue(m *matcher.StringMatcher) *matcher.ValueMatcher {
	return &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_StringMatch{StringMatch: m}}
}

// claimID is Istio's request claim generator: the claim, a string or a list, holds one
// of values (each as policyStringMatcher).
func claimID(claims, values []string) *rbacpb.Principal {
	var or []*matcher.ValueMatcher
	for _, v := range values {
		or = append(or, stringValue(policyStringMatcher(v, "")))
	}
	value := or[0]
	if len(or) > 1 {
		value = &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_OrMatch{OrMatch: &matcher.OrMatcher{ValueMatchers: or}}}
	}
	list := &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_ListMatch{ListMatch: &matcher.ListMatcher{
		MatchPattern: &matcher.ListMatcher_OneOf{OneOf: value},
	}}}
	return jwtClaimMatcher(claims, &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_OrMatch{OrMatch: &matcher.OrMatcher{
		ValueMatchers: []*matcher.ValueMatcher{list, value},
	}}})
}

// requestPrincipalID is Istio's request principal generator: "<iss>/<sub>" split at the
// last "/", each side matched in the payload ("*" any non-empty value, "*x" and "x*"
// suffix and prefix as Istio splits them); one value is its and_ids, several an or_ids.
func requestPrincipalID(values []string) *rbacpb.Principal {
	anyValue := &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: ".+"}}}
	exact := func(s string) *matcher.StringMatcher {
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}}
	}
	var or []*rbacpb.Principal
	for _, v := range values {
		idx := strings.LastIndex(v, "/")
		found := idx >= 0
		iss, sub := v, ""
		if found {
			iss, sub = v[:idx], v[idx+1:]
		}
		var mi, ms *matcher.StringMatcher
		switch {
		case v == "*":
			mi, ms = anyValue, anyValue
		case strings.HasPrefix(v, "*"):
			if found {
				mi = &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: strings.TrimPrefix(iss, "*")}}
				if iss == "*" {
					mi = anyValue
				}
				ms = exact(sub)
			} else {
				mi = anyValue
				ms = &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: strings.TrimPrefix(v, "*")}}
			}
		case strings.HasSuffix(v, "*"):
			if found {
				mi = exact(iss)
				ms = &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: strings.TrimSuffix(sub, "*")}}
				if sub == "*" {
					ms = anyValue
				}
			} else {
				mi = &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: strings.TrimSuffix(v, "*")}}
				ms = anyValue
			}
		default:
			mi, ms = exact(iss), exact(sub)
		}
		or = append(or, principals.and([]*rbacpb.Principal{
			jwtClaimMatcher([]string{"iss"}, stringValue(mi)),
			jwtClaimMatcher([]string{"sub"}, stringValue(ms)),
		}))
	}
	if len(or) == 1 {
		return or[0]
	}
	return principals.or(or)
}
