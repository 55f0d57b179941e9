package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The checks below follow Istio's validation of PeerAuthentication and AuthorizationPolicy
// (pkg/config/validation): they look at one object alone. The one check between objects,
// a single mesh-wide PeerAuthentication, is checkMeshWidePeerAuthentication.

// validateMeshConfig checks a MeshConfig on its own.
func validateMeshConfig(mc *meshv1alpha1.MeshConfig, p problems) {
	refuseUnimplemented(mc.ProtoReflect(), meshConfigFields(), "MeshConfig", p)
	if ns := mc.GetRootNamespace(); ns != "" {
		checkName(p, "spec.rootNamespace", ns, 63)
	}
	validateAccessLog(mc, p)
	validateMeshTracing(mc, p)
	validateMeshProxyMetadata(mc, p)      // proxymetadata.go
	validateMeshAccessLogProviders(mc, p) // meshconfig_otelals.go
	if td := mc.GetTrustDomain(); td != "" {
		checkTrustDomain(p, "spec.trustDomain", td)
	}
	for i, a := range mc.GetTrustDomainAliases() {
		checkTrustDomain(p, fmt.Sprintf("spec.trustDomainAliases[%d]", i), a)
	}
	secrets := map[string]bool{}
	for i, c := range mc.GetCertificates() { //nolint:staticcheck // deprecated in Istio; the DNS certificates page sets it
		f := fmt.Sprintf("spec.certificates[%d]", i)
		if msgs := validation.IsDNS1123Subdomain(c.GetSecretName()); len(msgs) > 0 {
			p.addf(f+".secretName", "%q: %s", c.GetSecretName(), strings.Join(msgs, "; "))
		}
		if secrets[c.GetSecretName()] {
			p.addf(f+".secretName", "%q is already the Secret of another certificate", c.GetSecretName())
		}
		secrets[c.GetSecretName()] = true
		if len(c.GetDnsNames()) == 0 {
			p.addf(f+".dnsNames", "at least one DNS name is required")
		}
		for j, n := range c.GetDnsNames() {
			if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
				p.addf(fmt.Sprintf("%s.dnsNames[%d]", f, j), "%q: %s", n, strings.Join(msgs, "; "))
			}
		}
	}
}

// checkTrustDomain checks a trust domain as Istio's mesh validation (ValidateTrustDomain):
// dot-separated DNS-1123 labels, the last one possibly empty ("istio.io.").
func checkTrustDomain(p problems, f, td string) {
	if td == "" {
		p.addf(f, "empty domain name not allowed")
		return
	}
	parts := strings.Split(td, ".")
	for i, label := range parts {
		if i == len(parts)-1 && label == "" {
			return
		}
		if len(validation.IsDNS1123Label(label)) > 0 {
			p.addf(f, "trust domain name %q invalid: %q is not a DNS-1123 label", td, label)
			return
		}
	}
}

// validatePeerAuthentication checks a PeerAuthentication on its own.
func validatePeerAuthentication(pa *security.PeerAuthentication, p problems) {
	refuseUnimplemented(pa.ProtoReflect(), peerAuthenticationFields(), "PeerAuthentication", p)
	checkSelector(pa.GetSelector(), "spec.selector", p)
	if pa.GetMtls() != nil {
		checkMTLSMode(pa.GetMtls().GetMode(), "spec.mtls.mode", p)
	}
	if len(pa.GetPortLevelMtls()) > 0 && !hasSelector(pa.GetSelector()) {
		p.addf("spec.portLevelMtls", "needs a selector with matchLabels (a mesh-wide or namespace-wide policy cannot set port-level mTLS, as in Istio)")
	}
	for _, port := range sortedUintKeys(pa.GetPortLevelMtls()) {
		f := fmt.Sprintf("spec.portLevelMtls[%d]", port)
		if msg := checkPort(int64(port)); msg != "" {
			p.addf(f, "%s", msg)
		}
		checkMTLSMode(pa.GetPortLevelMtls()[port].GetMode(), f+".mode", p)
	}
}

func checkMTLSMode(m security.PeerAuthentication_MutualTLS_Mode, f string, p problems) {
	if _, ok := security.PeerAuthentication_MutualTLS_Mode_name[int32(m)]; !ok {
		p.addf(f, "%d is not a mode (UNSET, DISABLE, PERMISSIVE or STRICT)", m)
	}
}

// hasSelector reports whether sel selects workloads: Istio treats a selector without
// matchLabels as no selector.
func hasSelector(sel *typev1beta1.WorkloadSelector) bool {
	return len(sel.GetMatchLabels()) > 0
}

// checkSelector checks a workload selector's labels as Kubernetes label keys and values.
func checkSelector(sel *typev1beta1.WorkloadSelector, f string, p problems) {
	labels := sel.GetMatchLabels()
	for _, k := range sortedKeysOf(labels) {
		v := labels[k]
		lf := f + ".matchLabels[" + k + "]"
		switch {
		case k == "":
			p.addf(f+".matchLabels", "a label key must not be empty")
			continue
		case strings.Contains(k, "*") || strings.Contains(v, "*"):
			p.addf(lf, "wildcards are not supported in a selector")
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			p.addf(lf, "%q is not a label key: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			p.addf(lf, "%q is not a label value: %s", v, strings.Join(errs, "; "))
		}
	}
}

// validateAuthorizationPolicy checks an AuthorizationPolicy on its own.
func validateAuthorizationPolicy(ap *security.AuthorizationPolicy, p problems) {
	refuseUnimplemented(ap.ProtoReflect(), authorizationPolicyFields(), "AuthorizationPolicy", p)
	checkSelector(ap.GetSelector(), "spec.selector", p)
	checkPolicyTargets(ap.GetSelector(), ap.GetTargetRef(), ap.GetTargetRefs(), p)
	switch a := ap.GetAction(); a {
	case security.AuthorizationPolicy_ALLOW, security.AuthorizationPolicy_DENY:
	default:
		p.addf("spec.action", "%s is not supported by meshlab (ALLOW or DENY)", a)
	}
	for i, r := range ap.GetRules() {
		f := fmt.Sprintf("spec.rules[%d]", i)
		for j, from := range r.GetFrom() {
			checkSource(from.GetSource(), fmt.Sprintf("%s.from[%d].source", f, j), p)
		}
		for j, to := range r.GetTo() {
			checkOperation(to.GetOperation(), fmt.Sprintf("%s.to[%d].operation", f, j), p)
		}
		for j, c := range r.GetWhen() {
			checkCondition(c, fmt.Sprintf("%s.when[%d]", f, j), p)
		}
	}
}

// checkDryRunAnnotation checks istio.io/dry-run as Istio's validation webhook does
// (validateMetadata): only an AuthorizationPolicy takes it, of action ALLOW or DENY,
// with a value strconv.ParseBool reads. Kubernetes' own kinds take any annotation.
func checkDryRunAnnotation(top map[string]any, apiVersion string, o *Object, p problems) {
	meta, _ := top["metadata"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	raw, found := anns[model.DryRunAnnotation]
	if !found {
		return
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.HasSuffix(group, ".istio.io") {
		return
	}
	f := "metadata.annotations." + model.DryRunAnnotation
	ap := o.AuthorizationPolicy
	if o.Origin.Kind != "AuthorizationPolicy" {
		p.addf(f, "unsupported annotation on a %s (only an AuthorizationPolicy can be dry-run): remove the annotation", o.Origin.Kind)
		return
	}
	if ap == nil {
		return // the spec did not decode: already reported
	}
	switch a := ap.GetAction(); a {
	case security.AuthorizationPolicy_ALLOW, security.AuthorizationPolicy_DENY:
	default:
		p.addf(f, "dry-run supports actions ALLOW and DENY only, not %s", a)
		return
	}
	v, _ := raw.(string)
	if _, err := strconv.ParseBool(v); err != nil {
		p.addf(f, "invalid value %q: want true or false", v)
	}
}

// checkPolicyTargets checks a policy's targetRef and targetRefs as Istio's validation:
// at most one of selector, targetRef and targetRefs; each reference names an object of
// its own namespace (no namespace) of an allowed kind. Istio also allows a ServiceEntry,
// whose waypoint chains meshlab does not generate: refused by name.
func checkPolicyTargets(sel *typev1beta1.WorkloadSelector, ref *typev1beta1.PolicyTargetReference, refs []*typev1beta1.PolicyTargetReference, p problems) {
	set := 0
	for _, b := range []bool{sel != nil, ref != nil, len(refs) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		p.addf("spec", "only one of selector, targetRef or targetRefs can be set")
	}
	if ref != nil {
		checkPolicyTarget(ref, "spec.targetRef", p)
	}
	for i, r := range refs {
		checkPolicyTarget(r, fmt.Sprintf("spec.targetRefs[%d]", i), p)
	}
}

func checkPolicyTarget(r *typev1beta1.PolicyTargetReference, f string, p problems) {
	if r.GetName() == "" {
		p.addf(f+".name", "is required")
	}
	if r.GetNamespace() != "" {
		p.addf(f+".namespace", "must not be set: a policy targets objects of its own namespace (Istio does not support cross-namespace targetRefs)")
	}
	switch model.PolicyTargetKind(r) {
	case model.TargetGateway, model.TargetService, model.TargetGatewayClass, model.TargetServiceEntry:
	default:
		p.addf(f, "must be to a gateway.networking.k8s.io Gateway or GatewayClass, a core Service or a networking.istio.io ServiceEntry (was %s/%s)", r.GetGroup(), r.GetKind())
	}
}

func checkSource(s *security.Source, f string, p problems) {
	if s == nil {
		p.addf(f, "is required")
		return
	}
	lists := []struct {
		name   string
		values []string
	}{
		{"principals", s.GetPrincipals()}, {"notPrincipals", s.GetNotPrincipals()},
		{"requestPrincipals", s.GetRequestPrincipals()}, {"notRequestPrincipals", s.GetNotRequestPrincipals()},
		{"namespaces", s.GetNamespaces()}, {"notNamespaces", s.GetNotNamespaces()},
	}
	ips := []struct {
		name   string
		values []string
	}{
		{"ipBlocks", s.GetIpBlocks()}, {"notIpBlocks", s.GetNotIpBlocks()},
		{"remoteIpBlocks", s.GetRemoteIpBlocks()}, {"notRemoteIpBlocks", s.GetNotRemoteIpBlocks()},
	}
	empty := true
	for _, l := range lists {
		empty = empty && len(l.values) == 0
		checkMatchValues(l.values, f+"."+l.name, p)
	}
	for _, l := range ips {
		empty = empty && len(l.values) == 0
		checkIPBlocks(l.values, f+"."+l.name, p)
	}
	if empty {
		p.addf(f, "must not be empty (set principals, requestPrincipals, namespaces, ipBlocks, remoteIpBlocks or their not forms)")
	}
}

// checkIPBlocks checks addresses and CIDR ranges as Istio's ValidateIPs: "10.1.2.3" or
// "10.1.0.0/16".
func checkIPBlocks(values []string, f string, p problems) {
	for i, v := range values {
		vf := fmt.Sprintf("%s[%d]", f, i)
		if _, err := ParseIPBlock(v); err != nil {
			p.addf(vf, "%v", err)
		}
	}
}

// ParseIPBlock parses an ipBlocks value (an address or a CIDR range) into a prefix, an
// address becoming a /32 (or /128), as Istio's AddrStrToCidrRange.
func ParseIPBlock(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		pfx, err := netip.ParsePrefix(v)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR range", v)
		}
		return pfx, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR range", v)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func checkOperation(op *security.Operation, f string, p problems) {
	if op == nil {
		p.addf(f, "is required")
		return
	}
	if len(op.GetMethods())+len(op.GetNotMethods())+len(op.GetPaths())+len(op.GetNotPaths())+len(op.GetPorts())+len(op.GetNotPorts()) == 0 {
		p.addf(f, "must not be empty (set methods, notMethods, paths, notPaths, ports or notPorts)")
	}
	checkMatchValues(op.GetMethods(), f+".methods", p)
	checkMatchValues(op.GetNotMethods(), f+".notMethods", p)
	checkPaths(op.GetPaths(), f+".paths", p)
	checkPaths(op.GetNotPaths(), f+".notPaths", p)
	checkPortStrings(op.GetPorts(), f+".ports", p)
	checkPortStrings(op.GetNotPorts(), f+".notPorts", p)
}

// Condition keys meshlab implements: request.headers[<name>], request.auth.claims[<name>]
// (nested claims as [a][b]), request.auth.principal, request.auth.audiences,
// request.auth.presenter, source.ip and remote.ip.
var (
	whenHeaderKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^request\.headers\[([^\[\]]+)\]$`) })
	whenClaimKey  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^request\.auth\.claims(\[[^\[\]]+\])+$`) })
)

// Condition keys with a fixed name.
const (
	whenRequestPrincipal = "request.auth.principal"
	whenRequestAudiences = "request.auth.audiences"
	whenRequestPresenter = "request.auth.presenter"
	whenSourceIP         = "source.ip"
	whenRemoteIP         = "remote.ip"
)

func checkCondition(c *security.Condition, f string, p problems) {
	ips := false
	switch k := c.GetKey(); {
	case k == "":
		p.addf(f+".key", "is required")
	case k == whenSourceIP || k == whenRemoteIP:
		ips = true
	case whenHeaderKey().MatchString(k), whenClaimKey().MatchString(k),
		k == whenRequestPrincipal, k == whenRequestAudiences, k == whenRequestPresenter:
	default:
		p.addf(f+".key", "%q is not supported by meshlab (supported keys: request.headers[<name>], request.auth.claims[<name>], request.auth.principal, request.auth.audiences, request.auth.presenter, source.ip, remote.ip)", k)
	}
	if len(c.GetValues()) == 0 && len(c.GetNotValues()) == 0 {
		p.addf(f, "values or notValues is required")
	}
	if ips {
		checkIPBlocks(c.GetValues(), f+".values", p)
		checkIPBlocks(c.GetNotValues(), f+".notValues", p)
		return
	}
	checkMatchValues(c.GetValues(), f+".values", p)
	checkMatchValues(c.GetNotValues(), f+".notValues", p)
}

// checkMatchValues checks strings that become string matchers: not empty, and "*" only as
// the whole value, a prefix or a suffix (Istio's suffix, prefix and presence matches).
func checkMatchValues(values []string, f string, p problems) {
	for i, v := range values {
		checkMatchValue(v, fmt.Sprintf("%s[%d]", f, i), p)
	}
}

func checkMatchValue(v, vf string, p problems) {
	if v == "" {
		p.addf(vf, "must not be empty")
	} else if msg := checkWildcard(v); msg != "" {
		p.addf(vf, "%s", msg)
	}
}

func checkWildcard(v string) string {
	n := strings.Count(v, "*")
	if n == 0 || v == "*" || n == 1 && (strings.HasPrefix(v, "*") || strings.HasSuffix(v, "*")) {
		return ""
	}
	return fmt.Sprintf(`%q: "*" is only allowed as the whole value, a prefix or a suffix`, v)
}

func checkPaths(paths []string, f string, p problems) {
	for i, v := range paths {
		vf := fmt.Sprintf("%s[%d]", f, i)
		if strings.ContainsAny(v, "{}") {
			p.addf(vf, "%q: path templates ({*}, {**}) are not supported by meshlab", v)
			continue
		}
		checkMatchValue(v, vf, p)
	}
}

// checkPortStrings checks the ports of an operation: numbers written as strings.
func checkPortStrings(ports []string, f string, p problems) {
	for i, v := range ports {
		vf := fmt.Sprintf("%s[%d]", f, i)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			p.addf(vf, "%q is not a port number", v)
			continue
		}
		if msg := checkPort(n); msg != "" {
			p.addf(vf, "%s", msg)
		}
	}
}

func sortedUintKeys[V any](m map[uint32]V) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
