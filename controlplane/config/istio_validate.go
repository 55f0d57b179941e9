package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The checks below follow Istio's own validation (pkg/config/validation): they look at
// one object alone. References between objects are checked by checkIstioRefs.

// validateVirtualService checks a VirtualService on its own.
func validateVirtualService(vs *networking.VirtualService, p problems) {
	refuseUnimplemented(vs.ProtoReflect(), virtualServiceFields(), "VirtualService", p)
	checkVirtualServiceGateways(vs, p)
	checkJWTClaimRoutes(vs, p)
	if len(vs.GetHttp()) == 0 && len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
		p.addf("spec", "at least one http, tcp or tls route is required")
	}
	validateTLSRoutes(vs, p) // gateway.go
	for i, r := range vs.GetHttp() {
		validateHTTPRoute(r, fmt.Sprintf("spec.http[%d]", i), p)
	}
	for i, r := range vs.GetTcp() {
		f := fmt.Sprintf("spec.tcp[%d]", i)
		for j, m := range r.GetMatch() {
			if port := m.GetPort(); port != 0 {
				if msg := checkPort(int64(port)); msg != "" {
					p.addf(fmt.Sprintf("%s.match[%d].port", f, j), "%s", msg)
				}
			}
		}
		if len(r.GetRoute()) == 0 {
			p.addf(f+".route", "at least one destination is required")
		}
		weights := make([]int32, len(r.GetRoute()))
		for j, d := range r.GetRoute() {
			checkDestination(d.GetDestination(), fmt.Sprintf("%s.route[%d].destination", f, j), p)
			weights[j] = d.GetWeight()
		}
		checkWeights(weights, f+".route", p)
	}
}

func validateHTTPRoute(r *networking.HTTPRoute, f string, p problems) {
	for j, m := range r.GetMatch() {
		mf := fmt.Sprintf("%s.match[%d]", f, j)
		checkStringMatch(m.GetUri(), mf+".uri", p)
		checkStringMatch(m.GetMethod(), mf+".method", p)
		for _, k := range sortedKeysOf(m.GetHeaders()) {
			checkHeaderName(k, mf+".headers", p)
			checkStringMatch(m.GetHeaders()[k], mf+".headers["+k+"]", p)
		}
		for _, k := range sortedKeysOf(m.GetQueryParams()) {
			checkStringMatch(m.GetQueryParams()[k], mf+".queryParams["+k+"]", p)
		}
	}
	switch {
	case r.GetRedirect() != nil && len(r.GetRoute()) > 0:
		p.addf(f, "route and redirect are mutually exclusive")
	case r.GetRedirect() == nil && len(r.GetRoute()) == 0:
		p.addf(f, "a route or a redirect is required")
	case r.GetRedirect() != nil:
		if r.GetRewrite() != nil {
			p.addf(f+".rewrite", "cannot be set with redirect")
		}
		if r.GetMirror() != nil {
			p.addf(f+".mirror", "cannot be set with redirect")
		}
		rd := r.GetRedirect()
		if rd.GetUri() == "" && rd.GetAuthority() == "" {
			p.addf(f+".redirect", "uri or authority is required")
		}
		switch rd.GetRedirectCode() {
		case 0, 301, 302, 303, 307, 308:
		default:
			p.addf(f+".redirect.redirectCode", "%d is not a redirect code (301, 302, 303, 307 or 308)", rd.GetRedirectCode())
		}
	}
	weights := make([]int32, len(r.GetRoute()))
	for k, d := range r.GetRoute() {
		df := fmt.Sprintf("%s.route[%d]", f, k)
		checkDestination(d.GetDestination(), df+".destination", p)
		checkHeaderOps(d.GetHeaders(), df+".headers", p)
		weights[k] = d.GetWeight()
	}
	checkWeights(weights, f+".route", p)
	checkDuration(r.GetTimeout(), f+".timeout", p)
	if rt := r.GetRetries(); rt != nil {
		if rt.GetAttempts() < 0 {
			p.addf(f+".retries.attempts", "%d must not be negative", rt.GetAttempts())
		}
		checkDuration(rt.GetPerTryTimeout(), f+".retries.perTryTimeout", p)
		checkRetryOn(rt.GetRetryOn(), f+".retries.retryOn", p)
	}
	if fi := r.GetFault(); fi != nil {
		if fi.GetDelay() == nil && fi.GetAbort() == nil {
			p.addf(f+".fault", "a delay or an abort is required")
		}
		if d := fi.GetDelay(); d != nil {
			if d.GetFixedDelay() == nil {
				p.addf(f+".fault.delay.fixedDelay", "is required")
			}
			checkDuration(d.GetFixedDelay(), f+".fault.delay.fixedDelay", p)
			checkPercent(d.GetPercentage().GetValue(), f+".fault.delay.percentage.value", p)
		}
		if a := fi.GetAbort(); a != nil {
			if s := a.GetHttpStatus(); s < 200 || s > 599 {
				p.addf(f+".fault.abort.httpStatus", "%d is out of range 200-599", s)
			}
			checkPercent(a.GetPercentage().GetValue(), f+".fault.abort.percentage.value", p)
		}
	}
	if rw := r.GetRewrite(); rw != nil && rw.GetUri() == "" && rw.GetAuthority() == "" {
		p.addf(f+".rewrite", "uri or authority is required")
	}
	if r.GetMirror() != nil {
		checkDestination(r.GetMirror(), f+".mirror", p)
	}
	if r.GetMirrorPercentage() != nil {
		checkPercent(r.GetMirrorPercentage().GetValue(), f+".mirrorPercentage.value", p)
		if r.GetMirror() == nil {
			p.addf(f+".mirrorPercentage", "needs mirror")
		}
	}
	checkHeaderOps(r.GetHeaders(), f+".headers", p)
}

// validateDestinationRule checks a DestinationRule on its own.
func validateDestinationRule(dr *networking.DestinationRule, p problems) {
	refuseUnimplemented(dr.ProtoReflect(), destinationRuleFields(), "DestinationRule", p)
	if dr.GetHost() == "" {
		p.addf("spec.host", "is required")
	} else {
		checkHosts([]string{dr.GetHost()}, "spec.host", p)
	}
	checkTrafficPolicy(dr.GetTrafficPolicy(), "spec.trafficPolicy", p)
	seen := map[string]int{}
	for i, s := range dr.GetSubsets() {
		f := fmt.Sprintf("spec.subsets[%d]", i)
		checkName(p, f+".name", s.GetName(), 63)
		if j, dup := seen[s.GetName()]; dup {
			p.addf(f+".name", "%q is a duplicate of spec.subsets[%d].name", s.GetName(), j)
		}
		seen[s.GetName()] = i
		checkTrafficPolicy(s.GetTrafficPolicy(), f+".trafficPolicy", p)
	}
}

func checkTrafficPolicy(tp *networking.TrafficPolicy, f string, p problems) {
	if tp == nil {
		return
	}
	if lb := tp.GetLoadBalancer(); lb != nil {
		switch s := lb.GetSimple(); s {
		case networking.LoadBalancerSettings_UNSPECIFIED, networking.LoadBalancerSettings_ROUND_ROBIN,
			networking.LoadBalancerSettings_LEAST_REQUEST, networking.LoadBalancerSettings_RANDOM:
		default:
			p.addf(f+".loadBalancer.simple", "%s is not supported (ROUND_ROBIN, LEAST_REQUEST or RANDOM)", s)
		}
	}
	if cp := tp.GetConnectionPool(); cp != nil {
		nonNegative := func(v int32, field string) {
			if v < 0 {
				p.addf(f+".connectionPool."+field, "%d must not be negative", v)
			}
		}
		nonNegative(cp.GetTcp().GetMaxConnections(), "tcp.maxConnections")
		nonNegative(cp.GetHttp().GetHttp1MaxPendingRequests(), "http.http1MaxPendingRequests")
		nonNegative(cp.GetHttp().GetHttp2MaxRequests(), "http.http2MaxRequests")
		nonNegative(cp.GetHttp().GetMaxRequestsPerConnection(), "http.maxRequestsPerConnection")
	}
	if od := tp.GetOutlierDetection(); od != nil {
		checkDuration(od.GetInterval(), f+".outlierDetection.interval", p)
		checkDuration(od.GetBaseEjectionTime(), f+".outlierDetection.baseEjectionTime", p)
		if v := od.GetMaxEjectionPercent(); v < 0 || v > 100 {
			p.addf(f+".outlierDetection.maxEjectionPercent", "%d is out of range 0-100", v)
		}
	}
	if tls := tp.GetTls(); tls != nil {
		checkClientTLS(tls, f+".tls", p)
	}
	seen := map[uint32]int{}
	for i, pl := range tp.GetPortLevelSettings() {
		pf := fmt.Sprintf("%s.portLevelSettings[%d]", f, i)
		n := pl.GetPort().GetNumber()
		if msg := checkPort(int64(n)); msg != "" {
			p.addf(pf+".port.number", "%s", msg)
		} else if j, dup := seen[n]; dup {
			p.addf(pf+".port.number", "%d is a duplicate of %s.portLevelSettings[%d]", n, f, j)
		}
		seen[n] = i
		checkTrafficPolicy(&networking.TrafficPolicy{
			LoadBalancer: pl.GetLoadBalancer(), ConnectionPool: pl.GetConnectionPool(), OutlierDetection: pl.GetOutlierDetection(), Tls: pl.GetTls(),
		}, pf, p)
	}
}

// validateServiceEntry checks a ServiceEntry on its own.
func validateServiceEntry(se *networking.ServiceEntry, p problems) {
	refuseUnimplemented(se.ProtoReflect(), serviceEntryFields(), "ServiceEntry", p)
	checkEntryHosts(se, p)
	for i, a := range se.GetAddresses() {
		if pre, err := netip.ParsePrefix(a); err == nil && pre.Addr().Is4() && pre.IsSingleIP() {
			continue // one address written as a /32 CIDR, as the http-proxy task writes it
		}
		if addr, err := netip.ParseAddr(a); err != nil || !addr.Is4() {
			p.addf(fmt.Sprintf("spec.addresses[%d]", i), "%q is not an IPv4 address or a /32 (wider CIDRs are not supported: name each address)", a)
		}
	}
	if len(se.GetPorts()) == 0 {
		p.addf("spec.ports", "at least one port is required")
	}
	names := map[string]bool{}
	seen := map[uint32]int{}
	for i, sp := range se.GetPorts() {
		f := fmt.Sprintf("spec.ports[%d]", i)
		if msg := checkPort(int64(sp.GetNumber())); msg != "" {
			p.addf(f+".number", "%s", msg)
		} else if j, dup := seen[sp.GetNumber()]; dup {
			p.addf(f+".number", "%d is a duplicate of spec.ports[%d].number", sp.GetNumber(), j)
		}
		seen[sp.GetNumber()] = i
		if sp.GetName() == "" {
			p.addf(f+".name", "is required")
		} else if names[sp.GetName()] {
			p.addf(f+".name", "%q is a duplicate", sp.GetName())
		}
		names[sp.GetName()] = true
		if _, ok := parseProtocol(sp.GetProtocol()); sp.GetProtocol() != "" && !ok {
			p.addf(f+".protocol", "%q is not a protocol meshlab knows (HTTP, HTTP2, GRPC, TCP...)", sp.GetProtocol())
		}
		if sp.GetTargetPort() != 0 {
			if msg := checkAppPort(int64(sp.GetTargetPort())); msg != "" {
				p.addf(f+".targetPort", "%s", msg)
			}
		}
	}
	switch se.GetResolution() {
	case networking.ServiceEntry_STATIC:
		if len(se.GetEndpoints()) == 0 {
			p.addf("spec.endpoints", "resolution STATIC needs endpoints (names or IPs of lab pods, or IPs of the lab's outside world)")
		}
	case networking.ServiceEntry_DNS:
		// Without endpoints the proxy resolves the hosts themselves, through the lab's
		// DNS (the lab's Services, and the outside world's names for MESH_EXTERNAL).
	case networking.ServiceEntry_NONE:
		if len(se.GetEndpoints()) > 0 {
			p.addf("spec.endpoints", "resolution NONE takes no endpoints in meshlab (connections go to the address the client dialled; use STATIC to name endpoints)")
		}
	default:
		p.addf("spec.resolution", "%s is not supported (STATIC, DNS or NONE)", se.GetResolution())
	}
	for i, ep := range se.GetEndpoints() {
		f := fmt.Sprintf("spec.endpoints[%d]", i)
		if ep.GetAddress() == "" {
			p.addf(f+".address", "is required")
		}
		for _, name := range sortedKeysOf(ep.GetPorts()) {
			if !names[name] {
				p.addf(f+".ports["+name+"]", "names no port of spec.ports")
			}
			if msg := checkAppPort(int64(ep.GetPorts()[name])); msg != "" {
				p.addf(f+".ports["+name+"]", "%s", msg)
			}
		}
	}
}

// checkEntryHosts checks a ServiceEntry's hosts: DNS names, or a wildcard "*.<domain>"
// as Istio accepts it (the wildcard-egress-hosts task's "*.wikipedia.org"). A wildcard
// names no host to resolve, so resolution DNS refuses it as Istio's validation does;
// with resolution NONE its TLS, HTTPS and TCP ports are matched by the SNI the client
// sends (*.domain in the filter chain's server_names) and sent on to the address the
// client dialled. Its HTTP ports are refused: meshlab's sidecars route an entry's HTTP
// by its host's virtual host, which a wildcard entry without addresses does not get.
func checkEntryHosts(se *networking.ServiceEntry, p problems) {
	if len(se.GetHosts()) == 0 {
		p.addf("spec.hosts", "at least one host is required")
	}
	for i, h := range se.GetHosts() {
		hf := fmt.Sprintf("spec.hosts[%d]", i)
		if !strings.HasPrefix(h, "*.") {
			checkHost(h, hf, p)
			continue
		}
		checkWildcardHost(h, h, hf, p)
		if se.GetResolution() == networking.ServiceEntry_DNS {
			p.addf(hf, "%q: a wildcard host cannot be resolved by DNS (resolution DNS needs the names themselves; use resolution NONE, as the wildcard egress task does)", h)
		}
		for j, sp := range se.GetPorts() {
			if proto, ok := parseProtocol(sp.GetProtocol()); ok && proto.IsHTTP() || sp.GetProtocol() == "" {
				p.addf(fmt.Sprintf("spec.ports[%d].protocol", j), "%q on wildcard host %q is not supported: meshlab's sidecars route a wildcard entry by the TLS SNI alone; use protocol HTTPS or TLS, or an entry naming each host", cmp.Or(sp.GetProtocol(), "HTTP"), h)
			}
		}
	}
}

func checkHosts(hosts []string, f string, p problems) {
	if len(hosts) == 0 {
		p.addf(f, "at least one host is required")
	}
	for i, h := range hosts {
		hf := fmt.Sprintf("%s[%d]", f, i)
		if f == "spec.host" {
			hf = f
		}
		checkHost(h, hf, p)
	}
}

// checkHost checks one host of field hf: a lowercase DNS name, no wildcard.
func checkHost(h, hf string, p problems) {
	switch {
	case h == "":
		p.addf(hf, "must not be empty")
	case strings.Contains(h, "*"):
		p.addf(hf, "%q: wildcard hosts are not supported", h)
	case strings.ToLower(h) != h || strings.ContainsAny(h, " /:"):
		p.addf(hf, "%q is not a lowercase DNS name", h)
	}
}

func checkDestination(d *networking.Destination, f string, p problems) {
	if d == nil {
		p.addf(f, "is required")
		return
	}
	if d.GetHost() == "" {
		p.addf(f+".host", "is required")
	}
	if d.GetSubset() != "" {
		checkName(p, f+".subset", d.GetSubset(), 63)
	}
	if d.GetPort() != nil {
		if msg := checkPort(int64(d.GetPort().GetNumber())); msg != "" {
			p.addf(f+".port.number", "%s", msg)
		}
	}
}

// checkWeights applies Istio's rule: weights are relative (they need not sum to 100),
// none is negative, and several destinations must not all weigh 0.
func checkWeights(w []int32, f string, p problems) {
	var sum int64
	for i, v := range w {
		if v < 0 {
			p.addf(fmt.Sprintf("%s[%d].weight", f, i), "%d must not be negative", v)
		}
		sum += int64(v)
	}
	if len(w) > 1 && sum == 0 {
		p.addf(f, "total destination weight is 0")
	}
}

func checkStringMatch(m *networking.StringMatch, f string, p problems) {
	if m == nil {
		return
	}
	switch v := m.GetMatchType().(type) {
	case nil:
		p.addf(f, "exact, prefix or regex is required")
	case *networking.StringMatch_Exact:
		if v.Exact == "" {
			p.addf(f+".exact", "must not be empty")
		}
	case *networking.StringMatch_Prefix:
		if v.Prefix == "" {
			p.addf(f+".prefix", "must not be empty")
		}
	case *networking.StringMatch_Regex:
		if v.Regex == "" {
			p.addf(f+".regex", "must not be empty")
		} else if _, err := regexp.Compile(v.Regex); err != nil {
			p.addf(f+".regex", "%q is not an RE2 regular expression: %v", v.Regex, err)
		}
	}
}

func checkHeaderName(name, f string, p problems) {
	if _, claim := model.RoutingClaims(name); claim {
		return // a JWT claim (case sensitive), not a header
	}
	switch {
	case name == "":
		p.addf(f, "a header name must not be empty")
	case strings.HasPrefix(name, "@"):
		// Istio's ValidateHTTPHeaderNameOrJwtClaimRoute: "@" is no header character, and
		// the only "@" name is a claim route's.
		p.addf(f+"["+name+"]", "header name %s is not a valid header name (a JWT claim is matched as %s.<claim> or %s[<claim>])", name, model.JWTClaimHeader, model.JWTClaimHeader)
	case strings.ToLower(name) != name:
		p.addf(f+"["+name+"]", "header names must be lowercase")
	}
}

// checkJWTClaimRoutes refuses a claim route (a headers key "@request.auth.claims...") in
// a VirtualService that applies to sidecars, as Istio's validation does: only a gateway
// has its route selected again after the JWT filter.
func checkJWTClaimRoutes(vs *networking.VirtualService, p problems) {
	if !model.AppliesToMesh(vs) {
		return
	}
	for i, r := range vs.GetHttp() {
		for j, m := range r.GetMatch() {
			for _, k := range sortedKeysOf(m.GetHeaders()) {
				if _, claim := model.RoutingClaims(k); claim {
					p.addf(fmt.Sprintf("spec.http[%d].match[%d].headers[%s]", i, j, k),
						"JWT claim based routing (key: %s) is only supported for gateway, found no gateways: %v", k, vs.GetGateways())
				}
			}
		}
	}
}

func checkHeaderOps(h *networking.Headers, f string, p problems) {
	for dir, ops := range map[string]*networking.Headers_HeaderOperations{"request": h.GetRequest(), "response": h.GetResponse()} {
		for _, k := range sortedKeysOf(ops.GetSet()) {
			if k == "" {
				p.addf(f+"."+dir+".set", "a header name must not be empty")
			}
		}
		for _, k := range sortedKeysOf(ops.GetAdd()) {
			if k == "" {
				p.addf(f+"."+dir+".add", "a header name must not be empty")
			}
		}
		for i, k := range ops.GetRemove() {
			if k == "" {
				p.addf(fmt.Sprintf("%s.%s.remove[%d]", f, dir, i), "a header name must not be empty")
			}
		}
	}
}

// checkDuration applies Istio's rule: at least 1ms, in whole milliseconds.
func checkDuration(d *durationpb.Duration, f string, p problems) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		p.addf(f, "%v", err)
		return
	}
	switch v := d.AsDuration(); {
	case v < time.Millisecond:
		p.addf(f, "%s is shorter than 1ms", v)
	case v%time.Millisecond != 0:
		p.addf(f, "%s is not a whole number of milliseconds", v)
	}
}

func checkPercent(v float64, f string, p problems) {
	if v < 0 || v > 100 {
		p.addf(f, "%s is out of range 0-100", strconv.FormatFloat(v, 'g', -1, 64))
	}
}

// retryOnValues are the retry conditions Envoy's router knows (x-envoy-retry-on and
// x-envoy-retry-grpc-on), as Istio accepts them.
var retryOnValues = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
	"envoy-ratelimited": true, "retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true,
	"retriable-headers": true, "http3-post-connect-failure": true,
	"cancelled": true, "deadline-exceeded": true, "internal": true, "resource-exhausted": true, "unavailable": true,
}

func checkRetryOn(s, f string, p problems) {
	if s == "" {
		return
	}
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if retryOnValues[c] {
			continue
		}
		if n, err := strconv.Atoi(c); err == nil && n >= 100 && n <= 599 {
			continue
		}
		p.addf(f, "%q is not a retry condition (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, an HTTP status...)", c)
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkClientTLS checks a DestinationRule's tls settings: DISABLE; ISTIO_MUTUAL (with
// sni and subjectAltNames, as istiod's, e.g. to reach an egress gateway's ISTIO_MUTUAL
// server by its host); SIMPLE (TLS origination, verified against caCertificates, the
// Secret credentialName names, or else the proxy's system trust as Istio's
// VERIFY_CERTIFICATE_AT_CLIENT does); and MUTUAL (SIMPLE plus the client certificate
// of the Secret credentialName names). clientCertificate/privateKey are refused by name:
// meshlab's pods mount no volumes, so a path would be a file of the host read by the
// root agent, and a host's private key must not reach a pod's proxy (docs/SECURITY.md).
func checkClientTLS(tls *networking.ClientTLSSettings, f string, p problems) {
	m := tls.GetMode()
	for _, fs := range []struct {
		field string
		set   bool
	}{{"clientCertificate", tls.GetClientCertificate() != ""}, {"privateKey", tls.GetPrivateKey() != ""}} {
		if !fs.set {
			continue
		}
		if m == networking.ClientTLSSettings_MUTUAL {
			p.addf(f+"."+fs.field, "file paths are not read by meshlab: its pods mount no volumes, so the file would be the host's, read by the root agent and handed to the pod's proxy; put the client certificate in a Secret (kubernetes.io/tls, or generic with tls.crt/tls.key/ca.crt) and name it in credentialName, as Istio's egress TLS origination task does")
		} else {
			p.addf(f+"."+fs.field, "is read with mode MUTUAL only (the mode here is %s)", m)
		}
	}
	switch m {
	case networking.ClientTLSSettings_DISABLE, networking.ClientTLSSettings_ISTIO_MUTUAL:
		for _, fs := range []struct {
			field string
			set   bool
		}{{"caCertificates", tls.GetCaCertificates() != ""}, {"credentialName", tls.GetCredentialName() != ""}} {
			if fs.set {
				p.addf(f+"."+fs.field, "is read with modes SIMPLE and MUTUAL only (the mode here is %s; ISTIO_MUTUAL uses the mesh's certificates)", m)
			}
		}
		if m == networking.ClientTLSSettings_DISABLE && (tls.GetSni() != "" || len(tls.GetSubjectAltNames()) > 0) {
			p.addf(f+".mode", "DISABLE makes no TLS: sni and subjectAltNames are not read with it")
		}
		checkSANs(tls, f, p)
	case networking.ClientTLSSettings_SIMPLE, networking.ClientTLSSettings_MUTUAL:
		if ca := tls.GetCaCertificates(); ca != "" && !strings.HasPrefix(ca, "/") {
			p.addf(f+".caCertificates", "%q must be an absolute path (a file on the proxy's filesystem)", ca)
		}
		if tls.GetCredentialName() != "" && tls.GetCaCertificates() != "" {
			p.addf(f+".caCertificates", "is ignored when credentialName is set (as in Istio): set one of them")
		}
		if m == networking.ClientTLSSettings_MUTUAL && tls.GetCredentialName() == "" && tls.GetClientCertificate() == "" {
			p.addf(f+".credentialName", "is required for mode MUTUAL: the name of a Secret holding the client certificate (tls.crt/tls.key, or cert/key) and, to verify the server, its CA (ca.crt or cacert, or the Secret <name>-cacert)")
		}
		checkSANs(tls, f, p)
	default:
		p.addf(f+".mode", "%s is not a mode meshlab knows (DISABLE, SIMPLE, MUTUAL or ISTIO_MUTUAL)", m)
	}
}

func checkSANs(tls *networking.ClientTLSSettings, f string, p problems) {
	for i, s := range tls.GetSubjectAltNames() {
		if s == "" {
			p.addf(fmt.Sprintf("%s.subjectAltNames[%d]", f, i), "must not be empty")
		}
	}
}
