package xds

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/emptypb"
	securityv1beta1 "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/controlplane/model"
)

// istio.security.Authorization, the L4 policy istiod sends ztunnel, converted from
// AuthorizationPolicy and PeerAuthentication as istiod's ambient index converts them
// (pilot/pkg/serviceregistry/ambient: authorization.go, policies.go).

// StaticStrictPolicyName is the policy istiod sends whenever any PeerAuthentication
// exists: DENY a peer without an identity. A workload whose effective mTLS mode is
// STRICT names it (in the root namespace) among its authorization policies. Its '_'
// cannot appear in a Kubernetes name, so it never clashes with a user's policy.
const StaticStrictPolicyName = "istio_converted_static_strict"

// convertedPeerAuthenticationPrefix names the policy a workload PeerAuthentication with
// port-level modes becomes.
const convertedPeerAuthenticationPrefix = "converted_peer_authentication_"

// AuthorizationName returns a policy's resource name, "<namespace>/<name>".
func AuthorizationName(a *security.Authorization) string {
	return a.GetNamespace() + "/" + a.GetName()
}

// Authorizations returns the ztunnel policies of m sorted by resource name: every
// AuthorizationPolicy ztunnel enforces (no targetRefs, action ALLOW or DENY), every
// workload PeerAuthentication with port-level modes that needs a policy of its own, and
// the static STRICT policy when any PeerAuthentication exists.
func Authorizations(m *model.Model) []*security.Authorization {
	root := m.Mesh.Root()
	var out []*security.Authorization
	for _, ap := range m.Istio.AuthorizationPolicies {
		if a, _ := ConvertAuthorizationPolicy(root, ap); a != nil {
			out = append(out, a)
		}
	}
	pas := m.Istio.PeerAuthentications
	for _, pa := range pas {
		if a := convertPeerAuthentication(root, pa, namespacePeerAuthn(pas, pa.Namespace), namespacePeerAuthn(pas, root)); a != nil {
			out = append(out, a)
		}
	}
	if len(pas) > 0 {
		out = append(out, staticStrictPolicy(root))
	}
	slices.SortFunc(out, func(a, b *security.Authorization) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// staticStrictPolicy is istiod's static STRICT policy in the root namespace.
func staticStrictPolicy(root string) *security.Authorization {
	return &security.Authorization{
		Name:      StaticStrictPolicyName,
		Namespace: root,
		Scope:     security.Scope_WORKLOAD_SELECTOR,
		Action:    security.Action_DENY,
		Groups:    []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{notAuthenticated()}}}}},
	}
}

// notAuthenticated matches a peer without an identity (a plaintext connection).
func notAuthenticated() *security.Match {
	return &security.Match{NotPrincipals: []*security.StringMatch{presence()}}
}

func presence() *security.StringMatch {
	return &security.StringMatch{MatchType: &security.StringMatch_Presence{Presence: &emptypb.Empty{}}}
}

// ConvertAuthorizationPolicy returns ap as ztunnel's policy, as istiod converts it, and
// the HTTP attributes ztunnel cannot evaluate that ap uses (sorted). The policy is nil
// when ztunnel does not enforce ap: it has targetRefs (a waypoint's policy) or an action
// other than ALLOW and DENY (CUSTOM, AUDIT). Scope: a selector makes it
// WORKLOAD_SELECTOR, none NAMESPACE, none in the root namespace GLOBAL. Each rule is a
// group: its to (ports), its from (identities, namespaces, IP blocks) and each of its
// when conditions a Rules of its own. An ALLOW rule with an HTTP attribute is dropped,
// so it allows nothing (ztunnel fails closed); a DENY rule keeps its L4 parts, denying
// more than asked. A dry-run policy (istio.io/dry-run) is nil too: istiod sends ztunnel
// dry-run policies only with AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY, off by default
// (older ztunnels would enforce them), and marks the policy ZtunnelAccepted False
// (UnsupportedValue) instead; ztunnel never sees it.
func ConvertAuthorizationPolicy(root string, ap *model.IstioConfig[*securityv1beta1.AuthorizationPolicy]) (*security.Authorization, []string) {
	spec := ap.Spec
	if spec == nil || ap.DryRun() || len(spec.GetTargetRefs()) > 0 || spec.GetTargetRef() != nil {
		return nil, nil
	}
	scope := security.Scope_WORKLOAD_SELECTOR
	if spec.GetSelector() == nil {
		scope = security.Scope_NAMESPACE
		if ap.Namespace == root {
			scope = security.Scope_GLOBAL
		}
	}
	var action security.Action
	switch spec.GetAction() {
	case securityv1beta1.AuthorizationPolicy_ALLOW:
		action = security.Action_ALLOW
	case securityv1beta1.AuthorizationPolicy_DENY:
		action = security.Action_DENY
	default:
		return nil, nil
	}
	a := &security.Authorization{Name: ap.Name, Namespace: ap.Namespace, Scope: scope, Action: action}
	var l7 []string
	for _, rule := range spec.GetRules() {
		rules, found := convertRule(action, rule, ap.Namespace)
		if rules != nil {
			a.Groups = append(a.Groups, &security.Group{Rules: rules})
		}
		for _, f := range found {
			if !slices.Contains(l7, f) {
				l7 = append(l7, f)
			}
		}
	}
	slices.Sort(l7)
	return a, l7
}

// l4Conditions are the when keys ztunnel evaluates.
var l4Conditions = []string{"source.ip", "source.namespace", "source.principal", "destination.ip", "destination.port"}

// convertRule returns a rule's Rules (nil when an ALLOW rule uses HTTP attributes) and
// the HTTP attributes it uses.
func convertRule(action security.Action, rule *securityv1beta1.Rule, ns string) ([]*security.Rules, []string) {
	var l7 []string
	var to, from []*security.Match
	for _, t := range rule.GetTo() {
		op := t.GetOperation()
		l7 = append(l7, httpOperationFields(op)...)
		to = append(to, &security.Match{
			DestinationPorts:    ports(op.GetPorts()),
			NotDestinationPorts: ports(op.GetNotPorts()),
		})
	}
	for _, f := range rule.GetFrom() {
		src := f.GetSource()
		l7 = append(l7, httpSourceFields(src)...)
		from = append(from, &security.Match{
			SourceIps:          addresses(src.GetIpBlocks()),
			NotSourceIps:       addresses(src.GetNotIpBlocks()),
			Namespaces:         stringMatches(src.GetNamespaces()),
			NotNamespaces:      stringMatches(src.GetNotNamespaces()),
			ServiceAccounts:    serviceAccountMatches(src.GetServiceAccounts(), ns),
			NotServiceAccounts: serviceAccountMatches(src.GetNotServiceAccounts(), ns),
			Principals:         stringMatches(src.GetPrincipals()),
			NotPrincipals:      stringMatches(src.GetNotPrincipals()),
		})
	}
	rules := []*security.Rules{}
	if len(to) > 0 {
		rules = append(rules, &security.Rules{Matches: to})
	}
	if len(from) > 0 {
		rules = append(rules, &security.Rules{Matches: from})
	}
	for _, c := range rule.GetWhen() {
		if !slices.Contains(l4Conditions, c.GetKey()) {
			l7 = append(l7, c.GetKey())
		}
		m := &security.Match{}
		pos, neg := c.GetValues(), c.GetNotValues()
		switch c.GetKey() {
		case "source.namespace":
			m.Namespaces, m.NotNamespaces = stringMatches(pos), stringMatches(neg)
		case "source.principal":
			m.Principals, m.NotPrincipals = stringMatches(pos), stringMatches(neg)
		case "source.ip":
			m.SourceIps, m.NotSourceIps = addresses(pos), addresses(neg)
		case "destination.port":
			m.DestinationPorts, m.NotDestinationPorts = ports(pos), ports(neg)
		case "destination.ip":
			m.DestinationIps, m.NotDestinationIps = addresses(pos), addresses(neg)
		}
		rules = append(rules, &security.Rules{Matches: []*security.Match{m}})
	}
	if action == security.Action_ALLOW && len(l7) > 0 {
		return nil, l7
	}
	return rules, l7
}

// httpOperationFields returns the fields of an operation only a proxy of HTTP can match.
func httpOperationFields(op *securityv1beta1.Operation) []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"hosts", len(op.GetHosts()) > 0}, {"notHosts", len(op.GetNotHosts()) > 0},
		{"methods", len(op.GetMethods()) > 0}, {"notMethods", len(op.GetNotMethods()) > 0},
		{"paths", len(op.GetPaths()) > 0}, {"notPaths", len(op.GetNotPaths()) > 0},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// httpSourceFields returns the fields of a source only a proxy of HTTP can match.
func httpSourceFields(s *securityv1beta1.Source) []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"remoteIpBlocks", len(s.GetRemoteIpBlocks()) > 0}, {"notRemoteIpBlocks", len(s.GetNotRemoteIpBlocks()) > 0},
		{"requestPrincipals", len(s.GetRequestPrincipals()) > 0}, {"notRequestPrincipals", len(s.GetNotRequestPrincipals()) > 0},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// stringMatches converts policy values: "*" is presence, "*x" a suffix, "x*" a prefix,
// anything else exact.
func stringMatches(values []string) []*security.StringMatch {
	out := make([]*security.StringMatch, 0, len(values))
	for _, v := range values {
		var sm *security.StringMatch
		switch {
		case v == "*":
			sm = presence()
		case strings.HasPrefix(v, "*"):
			sm = &security.StringMatch{MatchType: &security.StringMatch_Suffix{Suffix: strings.TrimPrefix(v, "*")}}
		case strings.HasSuffix(v, "*"):
			sm = &security.StringMatch{MatchType: &security.StringMatch_Prefix{Prefix: strings.TrimSuffix(v, "*")}}
		default:
			sm = &security.StringMatch{MatchType: &security.StringMatch_Exact{Exact: v}}
		}
		out = append(out, sm)
	}
	return out
}

// serviceAccountMatches converts serviceAccounts values, "ns/sa" or "sa" of the policy's
// namespace.
func serviceAccountMatches(values []string, ns string) []*security.ServiceAccountMatch {
	out := make([]*security.ServiceAccountMatch, 0, len(values))
	for _, v := range values {
		if n, sa, ok := strings.Cut(v, "/"); ok {
			out = append(out, &security.ServiceAccountMatch{Namespace: n, ServiceAccount: sa})
		} else {
			out = append(out, &security.ServiceAccountMatch{Namespace: ns, ServiceAccount: v})
		}
	}
	return out
}

// ports converts port values, skipping what is not a port.
func ports(values []string) []uint32 {
	out := make([]uint32, 0, len(values))
	for _, v := range values {
		if p, err := strconv.ParseUint(v, 10, 32); err == nil && p <= 65535 {
			out = append(out, uint32(p))
		}
	}
	return out
}

// addresses converts IP and CIDR values (an IP is a full-length prefix, a CIDR keeps
// its address unmasked), skipping what is neither.
func addresses(values []string) []*security.Address {
	out := make([]*security.Address, 0, len(values))
	for _, v := range values {
		var ip netip.Addr
		var bits int
		if strings.Contains(v, "/") {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				continue
			}
			ip, bits = p.Addr(), p.Bits()
		} else {
			a, err := netip.ParseAddr(v)
			if err != nil {
				continue
			}
			ip, bits = a, a.BitLen()
		}
		out = append(out, &security.Address{Address: ip.AsSlice(), Length: uint32(bits)})
	}
	return out
}

// workloadPolicies returns a pod's Workload.authorization_policies as istiod's
// buildWorkloadPolicies: the selector AuthorizationPolicies ztunnel enforces that select
// it (of its namespace or the root namespace), sorted; then the PeerAuthentication
// policies of its effective mTLS mode. Namespace and global policies are not listed:
// ztunnel finds them by scope.
func workloadPolicies(m *model.Model, p *model.Pod) []string {
	root := m.Mesh.Root()
	var out []string
	for _, ap := range m.Istio.AuthorizationPolicies {
		sel := ap.Spec.GetSelector().GetMatchLabels()
		if len(sel) == 0 || (ap.Namespace != root && ap.Namespace != p.Namespace) || !labelsMatch(sel, p.Labels) {
			continue
		}
		if a, _ := ConvertAuthorizationPolicy(root, ap); a != nil {
			out = append(out, AuthorizationName(a))
		}
	}
	slices.Sort(out)
	return append(out, peerAuthenticationPolicies(m, p)...)
}

type peerAuthn = model.IstioConfig[*securityv1beta1.PeerAuthentication]

// peerAuthenticationPolicies returns the PeerAuthentication-derived policies a pod names
// (istiod's convertedSelectorPeerAuthentications), sorted: the static STRICT policy when
// its effective mode is STRICT, and its workload policy's converted form when port-level
// modes make exceptions to the effective mode. Ties at one level go to the oldest policy
// in istiod; meshlab has no creation times, so to the first in model order.
func peerAuthenticationPolicies(m *model.Model, p *model.Pod) []string {
	root := m.Mesh.Root()
	var mesh, ns, wl *peerAuthn
	for _, pa := range m.Istio.PeerAuthentications {
		if pa.Spec == nil || !peerAuthnApplies(pa, root, p) {
			continue
		}
		if len(pa.Spec.GetSelector().GetMatchLabels()) == 0 {
			if pa.Namespace == root {
				mesh = cmp.Or(mesh, pa)
			} else {
				ns = cmp.Or(ns, pa)
			}
		} else if pa.Namespace != root {
			wl = cmp.Or(wl, pa)
		}
	}
	strict := false
	if mesh != nil {
		strict = isMode(mesh.Spec.GetMtls(), MTLSStrict)
	}
	if ns != nil && !isUnset(ns.Spec.GetMtls()) {
		strict = isMode(ns.Spec.GetMtls(), MTLSStrict)
	}
	portPolicy := ""
	if wl != nil {
		spec := wl.Spec
		switch {
		case isMode(spec.GetMtls(), MTLSStrict):
			strict = true
		case isMode(spec.GetMtls(), MTLSPermissive), isMode(spec.GetMtls(), MTLSDisable):
			strict = false
		}
		converted := wl.Namespace + "/" + convertedPeerAuthenticationPrefix + wl.Name
		anyPort := func(modes ...MTLSMode) bool {
			for _, pm := range spec.GetPortLevelMtls() {
				for _, mode := range modes {
					if isMode(pm, mode) {
						return true
					}
				}
			}
			return false
		}
		if len(spec.GetPortLevelMtls()) > 0 {
			switch spec.GetMtls().GetMode() {
			case MTLSStrict:
				if anyPort(MTLSPermissive, MTLSDisable) {
					portPolicy, strict = converted, false
				}
			case MTLSPermissive, MTLSDisable:
				if anyPort(MTLSStrict) {
					portPolicy = converted
				}
			default: // UNSET: inherits the namespace's or the mesh's mode
				if strict {
					// istiod looks for PERMISSIVE ports only here, not DISABLE.
					if anyPort(MTLSPermissive) {
						portPolicy, strict = converted, false
					}
				} else if anyPort(MTLSStrict) {
					portPolicy = converted
				}
			}
		}
	}
	var out []string
	if strict {
		out = append(out, root+"/"+StaticStrictPolicyName)
	}
	if portPolicy != "" {
		out = append(out, portPolicy)
	}
	slices.Sort(out)
	return out
}

// peerAuthnApplies reports whether istiod fetches PeerAuthentication pa for pod p
// (fetchPeerAuthentications): a root-namespace policy without a selector, or a policy
// of the pod's namespace without a selector or whose selector matches the pod.
func peerAuthnApplies(pa *peerAuthn, root string, p *model.Pod) bool {
	sel := pa.Spec.GetSelector()
	if pa.Namespace == root && sel == nil {
		return true
	}
	if pa.Namespace != p.Namespace {
		return false
	}
	return sel == nil || labelsMatch(sel.GetMatchLabels(), p.Labels)
}

// namespacePeerAuthn returns the first PeerAuthentication of namespace ns without a
// selector (istiod: the oldest), or nil.
func namespacePeerAuthn(pas []*peerAuthn, ns string) *peerAuthn {
	for _, pa := range pas {
		if pa.Namespace == ns && pa.Spec != nil && pa.Spec.GetSelector() == nil {
			return pa
		}
	}
	return nil
}

func isUnset(m *securityv1beta1.PeerAuthentication_MutualTLS) bool {
	return m.GetMode() == securityv1beta1.PeerAuthentication_MutualTLS_UNSET
}

func isMode(m *securityv1beta1.PeerAuthentication_MutualTLS, mode MTLSMode) bool {
	return m != nil && m.GetMode() == mode
}

// convertPeerAuthentication returns the policy a workload PeerAuthentication with
// port-level modes becomes (istiod's convertPeerAuthentication), or nil when it needs
// none: a DENY of plaintext on its STRICT ports that its parents do not already make
// STRICT, with exceptions for its PERMISSIVE and DISABLE ports under an effective
// STRICT mode (merged with that STRICT, so the static policy is not also needed).
// nsPA and rootPA are the namespace's and the mesh's policies (nil when none).
func convertPeerAuthentication(root string, pa, nsPA, rootPA *peerAuthn) *security.Authorization {
	spec := pa.Spec
	if spec == nil || pa.Namespace == root || spec.GetSelector() == nil || len(spec.GetPortLevelMtls()) == 0 {
		return nil
	}
	mode := spec.GetMtls().GetMode()
	var nsMTLS, rootMTLS *securityv1beta1.PeerAuthentication_MutualTLS
	if nsPA != nil {
		nsMTLS = nsPA.Spec.GetMtls()
	}
	if rootPA != nil {
		rootMTLS = rootPA.Spec.GetMtls()
	}
	var rules []*security.Rules
	var groups []*security.Group
	if mode == MTLSStrict {
		rules = append(rules, &security.Rules{Matches: []*security.Match{notAuthenticated()}})
	}
	nonStrictPort := false
	portNumbers := make([]uint32, 0, len(spec.GetPortLevelMtls()))
	for port := range spec.GetPortLevelMtls() {
		portNumbers = append(portNumbers, port)
	}
	slices.Sort(portNumbers)
	for _, port := range portNumbers {
		switch portMode := spec.GetPortLevelMtls()[port].GetMode(); portMode {
		case MTLSStrict:
			// The parents already make this port STRICT. (istiod's condition, with Go's
			// precedence of && over ||, kept as it is.)
			if isMode(spec.GetMtls(), MTLSStrict) ||
				(isUnset(spec.GetMtls()) && (nsPA != nil && isMode(nsMTLS, MTLSStrict))) ||
				((nsPA == nil || isUnset(nsMTLS)) && rootPA != nil && isMode(rootMTLS, MTLSStrict)) {
				continue
			}
			m := notAuthenticated()
			m.DestinationPorts = []uint32{port}
			groups = append(groups, &security.Group{Rules: []*security.Rules{{Matches: []*security.Match{m}}}})
		case MTLSPermissive, MTLSDisable:
			if mode == MTLSPermissive || mode == MTLSDisable {
				continue
			}
			if mode == securityv1beta1.PeerAuthentication_MutualTLS_UNSET &&
				((nsPA != nil && !isMode(nsMTLS, MTLSStrict)) || (nsPA == nil && rootPA != nil && !isMode(rootMTLS, MTLSStrict)) || (nsPA == nil && rootPA == nil)) {
				continue
			}
			nonStrictPort = true
			rules = append(rules, &security.Rules{Matches: []*security.Match{{NotDestinationPorts: []uint32{port}}}})
		}
	}
	if mode == MTLSStrict && !nonStrictPort {
		return nil
	}
	if len(rules) == 0 && len(groups) == 0 {
		return nil
	}
	mergeStrict := (rootPA != nil && isMode(rootMTLS, MTLSStrict) && (nsPA == nil || isUnset(nsMTLS) || isMode(nsMTLS, MTLSStrict))) ||
		(nsPA != nil && isMode(nsMTLS, MTLSStrict))
	if mergeStrict && nonStrictPort {
		rules = append(rules, &security.Rules{Matches: []*security.Match{notAuthenticated()}})
	}
	if len(rules) > 0 {
		groups = append(groups, &security.Group{Rules: rules})
	}
	return &security.Authorization{
		Name:      convertedPeerAuthenticationPrefix + pa.Name,
		Namespace: pa.Namespace,
		Scope:     security.Scope_WORKLOAD_SELECTOR,
		Action:    security.Action_DENY,
		Groups:    groups,
	}
}
