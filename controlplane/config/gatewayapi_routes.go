package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GRPCRoute and TCPRoute, as istiod converts them (pilot/pkg/config/kube/gateway's
// convertGRPCRoute and convertTCPRoute): a GRPCRoute's rules become http routes (its
// method match a path match on "/<service>/<method>", its headers header matches), a
// TCPRoute's rules tcp routes. Both take a Gateway parent (the listeners of their
// protocol) or a Service parent (GAMMA: the mesh's traffic to that Service, on sidecars
// and on the Service's waypoint), through gatewayAPIIstio as an HTTPRoute does.

// The fields meshlab implements, by path below spec; any other is refused by name.
var (
	grpcRouteFields = lazyFields(func() string {
		return strings.Join([]string{
			"parentRefs hostnames rules",
			expand("parentRefs", "group kind namespace name sectionName port"),
			expand("rules", "name matches filters backendRefs"),
			expand("rules.matches", "method headers"),
			expand("rules.matches.method", "type service method"),
			expand("rules.matches.headers", "type name value"),
			grpcFilterFields("rules.filters"),
			expand("rules.filters", "requestMirror"),
			expand("rules.filters.requestMirror", "backendRef percent fraction"),
			expand("rules.filters.requestMirror.backendRef", "group kind name namespace port"),
			expand("rules.filters.requestMirror.fraction", "numerator denominator"),
			expand("rules.backendRefs", "group kind name namespace port weight filters"),
			grpcFilterFields("rules.backendRefs.filters"),
		}, " ")
	})
	tlsRouteFields = lazyFields(func() string {
		return strings.Join([]string{
			"parentRefs hostnames rules",
			expand("parentRefs", "group kind namespace name sectionName port"),
			expand("rules", "name backendRefs"),
			expand("rules.backendRefs", "group kind name namespace port weight"),
		}, " ")
	})
	tcpRouteFields = lazyFields(func() string {
		return strings.Join([]string{
			"parentRefs rules",
			expand("parentRefs", "group kind namespace name sectionName port"),
			expand("rules", "name backendRefs"),
			expand("rules.backendRefs", "group kind name namespace port weight"),
		}, " ")
	})
)

// grpcFilterFields are the fields of a GRPCRoute filter meshlab reads, below prefix (a
// rule's filters also take requestMirror).
func grpcFilterFields(prefix string) string {
	var out []string
	out = append(out, expand(prefix, "type requestHeaderModifier responseHeaderModifier"))
	for _, m := range []string{"requestHeaderModifier", "responseHeaderModifier"} {
		out = append(out, expand(prefix+"."+m, "set add remove"), expand(prefix+"."+m+".set", "name value"), expand(prefix+"."+m+".add", "name value"))
	}
	return strings.Join(out, " ")
}

// validateGRPCRoute checks a GRPCRoute on its own (its parents and backends are checked
// against the lab's Services by checkGatewayAPIRefs).
func validateGRPCRoute(gr *gwv1.GRPCRoute, ns string, p problems) {
	checkRouteHead(gr.Name, gr.Spec.ParentRefs, gr.Spec.Hostnames, ns, p)
	for i, r := range gr.Spec.Rules {
		f := fmt.Sprintf("spec.rules[%d]", i)
		for j, m := range r.Matches {
			mf := fmt.Sprintf("%s.matches[%d]", f, j)
			if mm := m.Method; mm != nil {
				if mm.Service == nil && mm.Method == nil {
					p.addf(mf+".method", "names neither service nor method")
				}
				switch t := ptrOr(mm.Type, gwv1.GRPCMethodMatchExact); t {
				case gwv1.GRPCMethodMatchExact:
					for _, v := range []*string{mm.Service, mm.Method} {
						if v != nil && (*v == "" || strings.Contains(*v, "/")) {
							p.addf(mf+".method", "%q is not a gRPC service or method name (no \"/\")", *v)
						}
					}
				case gwv1.GRPCMethodMatchRegularExpression:
					for _, v := range []*string{mm.Service, mm.Method} {
						if v != nil {
							checkRegex(*v, mf+".method", p)
						}
					}
				default:
					p.addf(mf+".method.type", "%q is not a method match type (Exact, RegularExpression)", t)
				}
			}
			for k, h := range m.Headers {
				hf := fmt.Sprintf("%s.headers[%d]", mf, k)
				if h.Name == "" {
					p.addf(hf+".name", "is required")
				}
				checkMatchType(string(ptrOr(h.Type, gwv1.GRPCHeaderMatchExact)), h.Value, hf, p)
			}
		}
		checkGRPCFilters(r.Filters, f, true, ns, p)
		if len(r.BackendRefs) == 0 {
			p.addf(f+".backendRefs", "at least one backend is required")
		} else if !slices.ContainsFunc(r.BackendRefs, func(b gwv1.GRPCBackendRef) bool { return ptrOr(b.Weight, 1) > 0 }) {
			p.addf(f+".backendRefs", "every weight is 0: meshlab does not serve a rule without a backend (Istio answers it 500)")
		}
		for j, b := range r.BackendRefs {
			bf := fmt.Sprintf("%s.backendRefs[%d]", f, j)
			checkBackendRef(b.BackendRef, bf, ns, p)
			checkGRPCFilters(b.Filters, bf, false, ns, p)
		}
	}
}

// checkGRPCFilters checks a GRPCRoute rule's (rule) or backend's filters: the header
// modifiers, and on a rule RequestMirror (its backend a Service as a backendRef's; one of
// percent or fraction). istiod refuses a backend's RequestMirror as an unsupported filter.
func checkGRPCFilters(fs []gwv1.GRPCRouteFilter, f string, rule bool, ns string, p problems) {
	for j, fl := range fs {
		ff := fmt.Sprintf("%s.filters[%d]", f, j)
		switch {
		case fl.Type == gwv1.GRPCRouteFilterRequestHeaderModifier:
			if fl.RequestHeaderModifier == nil {
				p.addf(ff+".requestHeaderModifier", "is required for type %s", fl.Type)
			}
		case fl.Type == gwv1.GRPCRouteFilterResponseHeaderModifier:
			if fl.ResponseHeaderModifier == nil {
				p.addf(ff+".responseHeaderModifier", "is required for type %s", fl.Type)
			}
		case fl.Type == gwv1.GRPCRouteFilterRequestMirror && rule:
			checkMirrorFilter(fl.RequestMirror, ff+".requestMirror", ns, p)
		case rule:
			p.addf(ff+".type", "%q is not supported by meshlab's GRPCRoute (RequestHeaderModifier, ResponseHeaderModifier, RequestMirror)", fl.Type)
		default:
			p.addf(ff+".type", "%q is not supported on a GRPCRoute backend (RequestHeaderModifier, ResponseHeaderModifier), as istiod's", fl.Type)
		}
	}
}

// checkMirrorFilter checks a RequestMirror filter (at field f): a Service backend, and
// percent (0-100) or fraction (numerator 0 to its denominator, default 100), not both.
func checkMirrorFilter(m *gwv1.HTTPRequestMirrorFilter, f, ns string, p problems) {
	if m == nil {
		p.addf(f, "is required for type RequestMirror")
		return
	}
	checkBackendRef(gwv1.BackendRef{BackendObjectReference: m.BackendRef}, f+".backendRef", ns, p)
	if m.Percent != nil && m.Fraction != nil {
		p.addf(f, "only one of percent or fraction may be specified")
	}
	if m.Percent != nil && (*m.Percent < 0 || *m.Percent > 100) {
		p.addf(f+".percent", "%d is out of range (0 to 100)", *m.Percent)
	}
	if fr := m.Fraction; fr != nil {
		if d := ptrOr(fr.Denominator, 100); d <= 0 || fr.Numerator < 0 || fr.Numerator > d {
			p.addf(f+".fraction", "%d/%d: the numerator must be 0 to the denominator, which must be positive", fr.Numerator, d)
		}
	}
}

// validateTCPRoute checks a TCPRoute on its own.
func validateTCPRoute(tr *gwv1.TCPRoute, ns string, p problems) {
	checkRouteHead(tr.Name, tr.Spec.ParentRefs, nil, ns, p)
	checkL4Rules(tr.Spec.Rules, func(r gwv1.TCPRouteRule) []gwv1.BackendRef { return r.BackendRefs }, ns, p)
}

// validateTLSRoute checks a TLSRoute on its own: as a TCPRoute, with hostnames (the
// SNI names it takes).
func validateTLSRoute(tr *gwv1.TLSRoute, ns string, p problems) {
	checkRouteHead(tr.Name, tr.Spec.ParentRefs, tr.Spec.Hostnames, ns, p)
	checkL4Rules(tr.Spec.Rules, func(r gwv1.TLSRouteRule) []gwv1.BackendRef { return r.BackendRefs }, ns, p)
}

// checkL4Rules checks the rules of a TCPRoute or TLSRoute: at least one, each with a
// backend of nonzero weight.
func checkL4Rules[R any](rules []R, backends func(R) []gwv1.BackendRef, ns string, p problems) {
	if len(rules) == 0 {
		p.addf("spec.rules", "at least one rule is required")
	}
	for i, rule := range rules {
		brs := backends(rule)
		f := fmt.Sprintf("spec.rules[%d]", i)
		if len(brs) == 0 {
			p.addf(f+".backendRefs", "at least one backend is required")
		} else if !slices.ContainsFunc(brs, func(b gwv1.BackendRef) bool { return ptrOr(b.Weight, 1) > 0 }) {
			p.addf(f+".backendRefs", "every weight is 0: meshlab does not serve a rule without a backend (Istio refuses its connections)")
		}
		for j, b := range brs {
			bf := fmt.Sprintf("%s.backendRefs[%d]", f, j)
			if isHostnameBackend(b) {
				checkHostnameBackend(b, bf, p)
				continue
			}
			checkBackendRef(b, bf, ns, p)
		}
	}
}

// istioNetworkingGroup is the API group of Istio's networking kinds, which Istio's
// gateway controller takes as a route's ServiceEntry parent and Hostname backend.
const istioNetworkingGroup = "networking.istio.io"

// isHostnameBackend reports whether b is Istio's Hostname backend (group
// networking.istio.io, kind Hostname): a host of the mesh's registry by name, as the
// wildcard egress task's www.wikipedia.org, which istiod makes the destination as written.
func isHostnameBackend(b gwv1.BackendRef) bool {
	return b.Group != nil && *b.Group == istioNetworkingGroup && b.Kind != nil && *b.Kind == "Hostname"
}

// checkHostnameBackend checks a Hostname backend: a DNS name, a port, no namespace.
func checkHostnameBackend(b gwv1.BackendRef, bf string, p problems) {
	checkWildcardHost(string(b.Name), string(b.Name), bf+".name", p)
	if strings.Contains(string(b.Name), "*") {
		p.addf(bf+".name", "%q: a Hostname backend names one host", b.Name)
	}
	if b.Namespace != nil {
		p.addf(bf+".namespace", "is not read for a Hostname backend (the name is the host)")
	}
	if b.Port == nil {
		p.addf(bf+".port", "is required for a Hostname backend")
	}
	if w := ptrOr(b.Weight, 1); w < 0 || w > 1000000 {
		p.addf(bf+".weight", "%d is out of range (0 to 1000000)", w)
	}
}

// grpcRouteRules converts a GRPCRoute's rules as istiod: one http route per match (a
// rule without matches matches every request), named as the rule or
// "<namespace>.<route>.<index>", sorted as istiod's sortHTTPRoutes (exact paths, then
// prefixes, then regular expressions, the longest first, then the most headers; routes
// without a match last; ties keep rule order).
func grpcRouteRules(gr *gwv1.GRPCRoute, ns string) []*networking.HTTPRoute {
	var out []*networking.HTTPRoute
	for i, rule := range gr.Spec.Rules {
		matches := slices.Clone(rule.Matches)
		if len(matches) == 0 {
			matches = []gwv1.GRPCRouteMatch{{}}
		}
		for _, m := range matches {
			r := &networking.HTTPRoute{Name: fmt.Sprintf("%s.%s.%d", ns, gr.Name, i)}
			if rule.Name != nil {
				r.Name = string(*rule.Name)
			}
			if len(rule.Matches) > 0 {
				hm := &networking.HTTPMatchRequest{Uri: grpcMethodMatch(m.Method)}
				for _, h := range m.Headers {
					if hm.Headers == nil {
						hm.Headers = map[string]*networking.StringMatch{}
					}
					hm.Headers[string(h.Name)] = gwStringMatch(string(ptrOr(h.Type, gwv1.GRPCHeaderMatchExact)), h.Value)
				}
				r.Match = []*networking.HTTPMatchRequest{hm}
			}
			r.Headers = grpcHeaderFilters(rule.Filters)
			r.Mirrors = mirrorPolicies(rule.Filters, ns)
			r.Route = grpcDestinations(rule.BackendRefs, ns)
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *networking.HTTPRoute) int {
		if len(a.Match) == 0 || len(b.Match) == 0 {
			return cmp.Compare(len(b.Match), len(a.Match))
		}
		ma, mb := a.Match[0], b.Match[0]
		ra, la := uriRank(ma.GetUri())
		rb, lb := uriRank(mb.GetUri())
		return cmp.Or(cmp.Compare(rb, ra), cmp.Compare(lb, la), cmp.Compare(len(mb.Headers), len(ma.Headers)))
	})
	return out
}

// uriRank ranks a path match as istiod's getURIRank and getURILength: exact 3, prefix 2,
// regular expression 1, none -1; and its length.
func uriRank(m *networking.StringMatch) (rank, length int) {
	switch {
	case m == nil:
		return -1, 0
	case m.GetExact() != "":
		return 3, len(m.GetExact())
	case m.GetPrefix() != "":
		return 2, len(m.GetPrefix())
	case m.GetRegex() != "":
		return 1, len(m.GetRegex())
	}
	return -1, 0
}

// grpcMethodMatch is a method match as the path istiod matches ("/<service>/<method>"):
// Exact with both an exact path, with the service only a prefix "/<service>/", with the
// method only a regular expression; RegularExpression a regular expression.
func grpcMethodMatch(mm *gwv1.GRPCMethodMatch) *networking.StringMatch {
	if mm == nil {
		return nil
	}
	regex := func(v string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: v}}
	}
	svc, method := mm.Service, mm.Method
	if ptrOr(mm.Type, gwv1.GRPCMethodMatchExact) == gwv1.GRPCMethodMatchRegularExpression {
		switch {
		case method == nil:
			return regex("/" + *svc + "/.+")
		case svc == nil:
			return regex("/[^/]+/" + *method)
		}
		return regex("/" + *svc + "/" + *method)
	}
	switch {
	case method == nil:
		return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/" + *svc + "/"}}
	case svc == nil:
		return regex("/[^/]+/" + *method)
	}
	return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: "/" + *svc + "/" + *method}}
}

// grpcHeaderFilters returns a GRPCRoute rule's or backend's header modifiers as Istio's
// headers (nil without any).
func grpcHeaderFilters(fs []gwv1.GRPCRouteFilter) *networking.Headers {
	var h *networking.Headers
	for _, f := range fs {
		switch f.Type {
		case gwv1.GRPCRouteFilterRequestHeaderModifier:
			h = cmp.Or(h, &networking.Headers{})
			h.Request = headerOperations(f.RequestHeaderModifier)
		case gwv1.GRPCRouteFilterResponseHeaderModifier:
			h = cmp.Or(h, &networking.Headers{})
			h.Response = headerOperations(f.ResponseHeaderModifier)
		}
	}
	return h
}

// mirrorPolicies returns a GRPCRoute rule's RequestMirror filters as its routes'
// mirrors, in filter order (mirrorPolicy).
func mirrorPolicies(fs []gwv1.GRPCRouteFilter, ns string) []*networking.HTTPMirrorPolicy {
	var out []*networking.HTTPMirrorPolicy
	for _, f := range fs {
		if f.Type == gwv1.GRPCRouteFilterRequestMirror && f.RequestMirror != nil {
			out = append(out, mirrorPolicy(f.RequestMirror, ns))
		}
	}
	return out
}

// mirrorPolicy is a RequestMirror filter (an HTTPRoute's or a GRPCRoute's) as istiod's
// createMirrorFilter: an Istio mirror policy of the backend's Service and port, its
// percentage 100*numerator/denominator (default 100) for a fraction, the percent as
// written, or none (every request) without either.
func mirrorPolicy(m *gwv1.HTTPRequestMirrorFilter, ns string) *networking.HTTPMirrorPolicy {
	mp := &networking.HTTPMirrorPolicy{Destination: backendDestination(gwv1.BackendRef{BackendObjectReference: m.BackendRef}, ns)}
	if fr := m.Fraction; fr != nil {
		mp.Percentage = &networking.Percent{Value: 100 * float64(fr.Numerator) / float64(ptrOr(fr.Denominator, 100))}
	} else if m.Percent != nil {
		mp.Percentage = &networking.Percent{Value: float64(*m.Percent)}
	}
	return mp
}

// grpcDestinations returns a GRPCRoute rule's backends as istiod's buildGRPCDestination:
// backends of weight 0 left out, the others with their weights as written (none when
// only one is left), each with its own header modifiers.
func grpcDestinations(brs []gwv1.GRPCBackendRef, ns string) []*networking.HTTPRouteDestination {
	var out []*networking.HTTPRouteDestination
	for _, b := range brs {
		if ptrOr(b.Weight, 1) == 0 {
			continue
		}
		out = append(out, &networking.HTTPRouteDestination{
			Destination: backendDestination(b.BackendRef, ns),
			Weight:      ptrOr(b.Weight, 1),
			Headers:     grpcHeaderFilters(b.Filters),
		})
	}
	if len(out) == 1 {
		out[0].Weight = 0
	}
	return out
}

// tcpRouteRules converts a TCPRoute's rules as istiod's convertTCPRoute: one tcp route
// per rule, its backends of nonzero weight with their weights as written (none when
// only one is left).
func tcpRouteRules(tr *gwv1.TCPRoute, ns string) []*networking.TCPRoute {
	var out []*networking.TCPRoute
	for _, rule := range tr.Spec.Rules {
		out = append(out, &networking.TCPRoute{Route: l4Destinations(rule.BackendRefs, ns)})
	}
	return out
}

// tlsRouteRules converts a TLSRoute's rules as istiod's convertTLSRoute: one tls route
// per rule matching the route's hostnames as SNI ("*" without any), its backends as a
// TCPRoute's.
func tlsRouteRules(tr *gwv1.TLSRoute, ns string) []*networking.TLSRoute {
	sni := []string{"*"}
	if len(tr.Spec.Hostnames) > 0 {
		sni = nil
		for _, h := range tr.Spec.Hostnames {
			sni = append(sni, string(h))
		}
	}
	var out []*networking.TLSRoute
	for _, rule := range tr.Spec.Rules {
		out = append(out, &networking.TLSRoute{
			Match: []*networking.TLSMatchAttributes{{SniHosts: slices.Clone(sni)}},
			Route: l4Destinations(rule.BackendRefs, ns),
		})
	}
	return out
}

// l4Destinations are a TCPRoute's or TLSRoute's backends as istiod's
// buildTCPDestination: those of nonzero weight with their weights as written (none
// when only one is left).
func l4Destinations(brs []gwv1.BackendRef, ns string) []*networking.RouteDestination {
	var out []*networking.RouteDestination
	for _, b := range brs {
		if ptrOr(b.Weight, 1) == 0 {
			continue
		}
		out = append(out, &networking.RouteDestination{Destination: backendDestination(b, ns), Weight: ptrOr(b.Weight, 1)})
	}
	if len(out) == 1 {
		out[0].Weight = 0
	}
	return out
}

// backendDestination is a Service backend as an Istio destination: the Service's
// hostname and the port.
func backendDestination(b gwv1.BackendRef, ns string) *networking.Destination {
	d := &networking.Destination{Host: string(b.Name) + "." + ns + ".svc.cluster.local"}
	if isHostnameBackend(b) {
		d.Host = string(b.Name) // the registry's host as written
	}
	if b.Port != nil {
		d.Port = &networking.PortSelector{Number: uint32(*b.Port)}
	}
	return d
}
