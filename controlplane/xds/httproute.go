package xds

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	previoushosts "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Istio's default retry policy, the base of every policy a VirtualService's retries set.
const (
	defaultRetryOn             = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
	defaultNumRetries          = 2
	previousHostsPredicate     = "envoy.retry_host_predicates.previous_hosts"
	hostSelectionRetryAttempts = 5
	headerMethod               = ":method"
)

// vsRouteBuilder translates the http routes of one VirtualService for one proxy and one
// listener port, as Istio's route.BuildHTTPRoutesForVirtualService does.
type vsRouteBuilder struct {
	m      *model.Model
	pod    *model.Pod
	vs     *model.IstioConfig[*networking.VirtualService]
	port   uint16
	byHost map[string][]servicePort
	// gateway is the Gateway whose server the routes are for; nil for a sidecar (the
	// reserved gateway "mesh").
	gateway *model.IstioConfig[*networking.Gateway]
	// cluster, when set, names a destination's cluster (a waypoint's: waypointCluster);
	// else it is the sidecar's outbound cluster (destinationCluster).
	cluster func(*networking.Destination) string
}

// routes returns the VirtualService's routes in order: one per match of each http route
// (one for a route without matches), skipping matches whose sourceLabels the proxy lacks,
// and stopping after a catch-all, which later routes could never follow.
func (b vsRouteBuilder) routes() ([]*route.Route, error) {
	var out []*route.Route
	for i, h := range b.vs.Spec.GetHttp() {
		matches := h.GetMatch()
		if len(matches) == 0 {
			matches = []*networking.HTTPMatchRequest{nil}
		}
		for _, mt := range matches {
			if mt != nil && (!b.sourceMatches(mt) || !b.matchApplies(mt)) {
				continue
			}
			r, err := b.translate(h, mt)
			if err != nil {
				return nil, fmt.Errorf("translate http[%d]: %w", i, err)
			}
			out = append(out, r)
			if isCatchAll(r) {
				return out, nil
			}
		}
	}
	return out, nil
}

// sourceMatches reports whether the proxy has a match's sourceLabels. A waypoint (no
// pod) has none: it drops every match with sourceLabels, as istiod does in ambient.
func (b vsRouteBuilder) sourceMatches(mt *networking.HTTPMatchRequest) bool {
	if b.pod == nil {
		return len(mt.GetSourceLabels()) == 0
	}
	return labelsMatch(mt.GetSourceLabels(), b.pod.Labels)
}

// matchApplies reports whether a match's port and gateways select the routes being
// built, as Istio's sourceMatchHTTP and port filter: port unset or the listener's (the
// service port on a sidecar, the server's number on a gateway); gateways unset, or
// naming "mesh" for a sidecar, or the Gateway ("<ns>/<name>", or a bare name in the
// VirtualService's namespace) for a gateway.
func (b vsRouteBuilder) matchApplies(mt *networking.HTTPMatchRequest) bool {
	if p := mt.GetPort(); p != 0 && p != uint32(b.port) {
		return false
	}
	gws := mt.GetGateways()
	switch {
	case len(gws) == 0:
		return true
	case b.gateway == nil:
		return slices.Contains(gws, model.MeshGateway)
	}
	return model.BindsGateway(&networking.VirtualService{Gateways: gws}, b.vs.Namespace, b.gateway.Namespace, b.gateway.Name)
}

// translate builds the route of one match of an http route.
func (b vsRouteBuilder) translate(in *networking.HTTPRoute, mt *networking.HTTPMatchRequest) (*route.Route, error) {
	name := in.GetName()
	if mt.GetName() != "" {
		name += "." + mt.GetName()
	}
	out := &route.Route{
		Name:     name,
		Match:    routeMatch(mt),
		Metadata: configMetadata(IstioConfigPath("virtual-service", b.vs.Namespace, b.vs.Name), ""),
	}
	ops := headerOperations(in.GetHeaders())
	out.RequestHeadersToAdd, out.RequestHeadersToRemove = ops.reqAdd, ops.reqRemove
	out.ResponseHeadersToAdd, out.ResponseHeadersToRemove = ops.respAdd, ops.respRemove
	if rd := in.GetRedirect(); rd != nil {
		out.Action = redirectAction(rd)
	} else {
		b.routeAction(out, in, ops.authority)
	}
	out.Decorator = &route.Decorator{Operation: b.operation(out)}
	if in.GetFault() != nil {
		hf, err := typed(httpFault(in.GetFault()))
		if err != nil {
			return nil, err
		}
		out.TypedPerFilterConfig = map[string]*anypb.Any{FaultFilter: hf}
	}
	return out, nil
}

// routeAction sets the forwarding action: destination cluster or weighted clusters,
// timeout (0s, Istio's "disabled", when unset) and max_grpc_timeout, rewrites, mirror
// and retries.
func (b vsRouteBuilder) routeAction(out *route.Route, in *networking.HTTPRoute, authority string) {
	action := &route.RouteAction{Timeout: durationpb.New(0)}
	if model.IsMeshRoute(b.vs.Name) {
		// A Gateway API route's backend that names no cluster answers 500, as istiod's
		// gateway semantics.
		action.ClusterNotFoundResponseCode = route.RouteAction_INTERNAL_SERVER_ERROR
	}
	if in.GetTimeout() != nil {
		action.Timeout = in.GetTimeout()
	}
	// As Istio's setTimeout: a gRPC request's grpc-timeout header is capped by the same
	// timeout (0: none).
	action.MaxGrpcTimeout = action.Timeout //nolint:staticcheck // deprecated, and Istio still sets it.
	out.Action = &route.Route_Route{Route: action}
	if rw := in.GetRewrite(); rw != nil {
		if rw.GetUri() != "" {
			action.PrefixRewrite = rw.GetUri()
		}
		if rw.GetAuthority() != "" {
			authority = rw.GetAuthority()
		}
	}
	if authority != "" {
		action.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: authority}
	}
	if in.GetMirror() != nil {
		if frac := mirrorFraction(in.GetMirrorPercentage()); frac != nil {
			action.RequestMirrorPolicies = []*route.RouteAction_RequestMirrorPolicy{{
				Cluster: b.destinationCluster(in.GetMirror()), RuntimeFraction: frac,
			}}
		}
	}
	// The mirrors list (a Gateway API route's RequestMirror filters), after mirror.
	for _, mp := range in.GetMirrors() {
		if frac := mirrorFraction(mp.GetPercentage()); frac != nil && mp.GetDestination() != nil {
			action.RequestMirrorPolicies = append(action.RequestMirrorPolicies, &route.RouteAction_RequestMirrorPolicy{
				Cluster: b.destinationCluster(mp.GetDestination()), RuntimeFraction: frac,
			})
		}
	}
	if len(in.GetRoute()) == 1 {
		dst := in.GetRoute()[0]
		action.ClusterSpecifier = &route.RouteAction_Cluster{Cluster: b.destinationCluster(dst.GetDestination())}
		if dst.GetHeaders() != nil {
			ops := headerOperations(dst.GetHeaders())
			out.RequestHeadersToAdd = append(out.RequestHeadersToAdd, ops.reqAdd...)
			out.RequestHeadersToRemove = append(out.RequestHeadersToRemove, ops.reqRemove...)
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, ops.respAdd...)
			out.ResponseHeadersToRemove = append(out.ResponseHeadersToRemove, ops.respRemove...)
			if ops.authority != "" && action.HostRewriteSpecifier == nil {
				action.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
			}
		}
	} else {
		wc := &route.WeightedCluster{}
		for _, dst := range in.GetRoute() {
			if dst.GetWeight() == 0 {
				continue // Istio drops zero weights when there are several destinations
			}
			cw := &route.WeightedCluster_ClusterWeight{
				Name:   b.destinationCluster(dst.GetDestination()),
				Weight: wrapperspb.UInt32(uint32(dst.GetWeight())),
			}
			if dst.GetHeaders() != nil {
				ops := headerOperations(dst.GetHeaders())
				cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = ops.reqAdd, ops.reqRemove
				cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = ops.respAdd, ops.respRemove
				if ops.authority != "" {
					cw.HostRewriteSpecifier = &route.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
				}
			}
			wc.Clusters = append(wc.Clusters, cw)
		}
		action.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	action.RetryPolicy = retryPolicy(in.GetRetries())
}

// destinationCluster returns the cluster of a destination as Istio's
// GetDestinationCluster: its port, else the service's only port, else the listener's.
func (b vsRouteBuilder) destinationCluster(d *networking.Destination) string {
	if b.cluster != nil {
		return b.cluster(d)
	}
	return destinationCluster(b.m, b.vs.Namespace, d, b.port, b.byHost)
}

func destinationCluster(m *model.Model, ns string, d *networking.Destination, listenPort uint16, byHost map[string][]servicePort) string {
	host := resolveHost(m, d.GetHost(), ns)
	port := listenPort
	if d.GetPort() != nil {
		port = uint16(d.GetPort().GetNumber())
	} else if sps := byHost[host]; len(sps) == 1 {
		port = sps[0].port.Port
	}
	return OutboundClusterName(port, d.GetSubset(), host)
}

// operation returns the route's decorator operation as Istio's GetRouteOperation:
// "<host>:<port><path>" for a single destination cluster, else "<vs name>:<port><path>".
func (b vsRouteBuilder) operation(r *route.Route) string {
	path := "/*"
	switch m := r.GetMatch(); {
	case m.GetPrefix() != "":
		path = m.GetPrefix() + "*"
	case m.GetPath() != "":
		path = m.GetPath()
	case m.GetSafeRegex() != nil:
		path = m.GetSafeRegex().GetRegex()
	}
	if parts := strings.Split(r.GetRoute().GetCluster(), "|"); len(parts) == 4 {
		return parts[3] + ":" + parts[1] + path
	}
	return b.vs.Name + ":" + strconv.Itoa(int(b.port)) + path
}

// routeMatch translates a match as Istio's TranslateRouteMatch: uri to prefix, path or
// safe_regex (prefix "/" without a match), headers sorted by name, then the method as
// the ":method" header, then query parameters (sorted by name here; Istio's order is
// that of a map). Matching is case sensitive.
func routeMatch(in *networking.HTTPMatchRequest) *route.RouteMatch {
	out := &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}}
	if in == nil {
		return out
	}
	for _, name := range sortedKeys(in.GetHeaders()) {
		if mm := claimRouteMatcher(name, in.GetHeaders()[name]); mm != nil {
			out.DynamicMetadata = append(out.DynamicMetadata, mm)
			continue
		}
		out.Headers = append(out.Headers, headerMatcher(name, in.GetHeaders()[name]))
	}
	switch u := in.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		out.PathSpecifier = &route.RouteMatch_Path{Path: u.Exact}
	case *networking.StringMatch_Prefix:
		out.PathSpecifier = &route.RouteMatch_Prefix{Prefix: u.Prefix}
	case *networking.StringMatch_Regex:
		out.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: u.Regex}}
	}
	out.CaseSensitive = wrapperspb.Bool(!in.GetIgnoreUriCase())
	if in.GetMethod() != nil {
		out.Headers = append(out.Headers, headerMatcher(headerMethod, in.GetMethod()))
	}
	for _, name := range sortedKeys(in.GetQueryParams()) {
		sm := in.GetQueryParams()[name]
		qm := &route.QueryParameterMatcher{Name: name}
		if presentMatch(sm) {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		} else {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_StringMatch{StringMatch: stringMatcher(sm)}
		}
		out.QueryParameters = append(out.QueryParameters, qm)
	}
	return out
}

func headerMatcher(name string, sm *networking.StringMatch) *route.HeaderMatcher {
	hm := &route.HeaderMatcher{Name: name}
	if presentMatch(sm) {
		hm.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
	} else {
		hm.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: stringMatcher(sm)}
	}
	return hm
}

// presentMatch reports whether a match only asks for presence: no match type, or the
// regex "*" (not RE2; Istio reads it as "any value").
func presentMatch(sm *networking.StringMatch) bool {
	return sm.GetMatchType() == nil || sm.GetRegex() == "*"
}

func stringMatcher(sm *networking.StringMatch) *matcher.StringMatcher {
	switch v := sm.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: v.Exact}}
	case *networking.StringMatch_Prefix:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: v.Prefix}}
	case *networking.StringMatch_Regex:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: v.Regex}}}
	}
	return nil
}

// isCatchAll reports whether a route matches every request, as Istio's IsCatchAllRoute.
func isCatchAll(r *route.Route) bool {
	m := r.GetMatch()
	all := m.GetPrefix() == "/" || m.GetSafeRegex().GetRegex() == ".*"
	return all && len(m.GetHeaders()) == 0 && len(m.GetQueryParameters()) == 0 && len(m.GetDynamicMetadata()) == 0
}

// claimRouteMatcher translates a headers match on "@request.auth.claims.<a>.<b>" or
// "@request.auth.claims[<a>][<b>]" (model.RoutingClaims) into a dynamic metadata matcher
// on the JWT filter's payload, as Istio's translateMetadataMatch: the claim at that path
// equal to the match, or a list holding an item equal to it. Any other name (nil) is a
// request header match.
func claimRouteMatcher(name string, sm *networking.StringMatch) *matcher.MetadataMatcher {
	claims, ok := model.RoutingClaims(name)
	if !ok {
		return nil
	}
	path := []*matcher.MetadataMatcher_PathSegment{{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: JWTPayloadKey}}}
	for _, c := range claims {
		path = append(path, &matcher.MetadataMatcher_PathSegment{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: c}})
	}
	value := stringValue(stringMatcher(sm))
	list := &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_ListMatch{ListMatch: &matcher.ListMatcher{
		MatchPattern: &matcher.ListMatcher_OneOf{OneOf: value},
	}}}
	return &matcher.MetadataMatcher{Filter: JWTFilterName, Path: path, Value: &matcher.ValueMatcher{
		MatchPattern: &matcher.ValueMatcher_OrMatch{OrMatch: &matcher.OrMatcher{ValueMatchers: []*matcher.ValueMatcher{list, value}}},
	}}
}

// headerOps are a Headers translated as Istio's TranslateHeadersOperations.
type headerOps struct {
	reqAdd, respAdd       []*core.HeaderValueOption
	reqRemove, respRemove []string
	authority             string // set from a ":authority" or "host" header, rewriting the host
}

// headerOperations translates set to OVERWRITE_IF_EXISTS_OR_ADD and add to
// APPEND_IF_EXISTS_OR_ADD (set first, each sorted by name); pseudo-headers and "host" are
// dropped, a set (else add) authority becomes the host rewrite.
func headerOperations(h *networking.Headers) headerOps {
	var ops headerOps
	if h == nil {
		return ops
	}
	setReq, setAuth := headerValues(h.GetRequest().GetSet(), core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	addReq, addAuth := headerValues(h.GetRequest().GetAdd(), core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	ops.reqAdd = append(setReq, addReq...)
	setResp, _ := headerValues(h.GetResponse().GetSet(), core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	addResp, _ := headerValues(h.GetResponse().GetAdd(), core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	ops.respAdd = append(setResp, addResp...)
	ops.reqRemove = dropInternal(h.GetRequest().GetRemove())
	ops.respRemove = dropInternal(h.GetResponse().GetRemove())
	ops.authority = addAuth
	if setAuth != "" {
		ops.authority = setAuth
	}
	return ops
}

func headerValues(hs map[string]string, action core.HeaderValueOption_HeaderAppendAction) ([]*core.HeaderValueOption, string) {
	var out []*core.HeaderValueOption
	authority := ""
	for _, k := range sortedKeys(hs) {
		if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
			authority = hs[k]
		}
		if internalHeader(k) {
			continue
		}
		out = append(out, &core.HeaderValueOption{Header: &core.HeaderValue{Key: k, Value: hs[k]}, AppendAction: action})
	}
	return out, authority
}

func internalHeader(k string) bool {
	return strings.HasPrefix(k, ":") || strings.EqualFold(k, "host")
}

func dropInternal(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !internalHeader(k) {
			out = append(out, k)
		}
	}
	return out
}

// redirectAction translates a redirect as Istio's ApplyRedirect.
func redirectAction(rd *networking.HTTPRedirect) *route.Route_Redirect {
	a := &route.RedirectAction{
		HostRedirect:         rd.GetAuthority(),
		PathRewriteSpecifier: &route.RedirectAction_PathRedirect{PathRedirect: rd.GetUri()},
	}
	switch rd.GetRedirectCode() {
	case 302:
		a.ResponseCode = route.RedirectAction_FOUND
	case 303:
		a.ResponseCode = route.RedirectAction_SEE_OTHER
	case 307:
		a.ResponseCode = route.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		a.ResponseCode = route.RedirectAction_PERMANENT_REDIRECT
	default:
		a.ResponseCode = route.RedirectAction_MOVED_PERMANENTLY
	}
	return &route.Route_Redirect{Redirect: a}
}

// mirrorFraction returns the share of requests to mirror: 100% when no percentage is
// given, nil (no mirror) for an explicit 0.
func mirrorFraction(p *networking.Percent) *core.RuntimeFractionalPercent {
	if p == nil {
		return &core.RuntimeFractionalPercent{DefaultValue: &xdstype.FractionalPercent{Numerator: 100, Denominator: xdstype.FractionalPercent_HUNDRED}}
	}
	if p.GetValue() <= 0 {
		return nil
	}
	return &core.RuntimeFractionalPercent{DefaultValue: millionths(p)}
}

// millionths converts an Istio percentage (a float 0-100) as Istio does: parts per
// million.
func millionths(p *networking.Percent) *xdstype.FractionalPercent {
	return &xdstype.FractionalPercent{Numerator: uint32(p.GetValue() * 10000), Denominator: xdstype.FractionalPercent_MILLION}
}

// httpFault translates a fault as Istio's TranslateFault. A delay without a percentage
// gets the deprecated integer percent over 100 (0 when unset, as Istio: no delay); an
// abort without one gets none.
func httpFault(in *networking.HTTPFaultInjection) *fault.HTTPFault {
	out := &fault.HTTPFault{}
	if d := in.GetDelay(); d != nil && d.GetFixedDelay() != nil {
		out.Delay = &faultcommon.FaultDelay{
			FaultDelaySecifier: &faultcommon.FaultDelay_FixedDelay{FixedDelay: d.GetFixedDelay()},
			//nolint:staticcheck // percent is deprecated, and Istio still reads it.
			Percentage: &xdstype.FractionalPercent{Numerator: uint32(d.GetPercent()), Denominator: xdstype.FractionalPercent_HUNDRED},
		}
		if d.GetPercentage() != nil {
			out.Delay.Percentage = millionths(d.GetPercentage())
		}
	}
	if a := in.GetAbort(); a != nil && a.GetHttpStatus() != 0 {
		out.Abort = &fault.FaultAbort{ErrorType: &fault.FaultAbort_HttpStatus{HttpStatus: uint32(a.GetHttpStatus())}}
		if a.GetPercentage() != nil {
			out.Abort.Percentage = millionths(a.GetPercentage())
		}
	}
	return out
}

// retryPolicy translates retries as Istio's retry.ConvertPolicy: no retries gives
// Istio's default policy (2 retries on connect-failure, refused-stream, unavailable,
// cancelled and retriable-status-codes with no status code, another host each time),
// attempts 0 disables retries, and otherwise the default policy with num_retries,
// per_try_timeout and retry_on (HTTP status codes in it become retriable_status_codes).
func retryPolicy(in *networking.HTTPRetry) *route.RetryPolicy {
	if in != nil && in.GetAttempts() <= 0 {
		return nil
	}
	ph, _ := anypb.New(&previoushosts.PreviousHostsPredicate{}) // an empty registered message always packs
	out := &route.RetryPolicy{
		RetryOn:                       defaultRetryOn,
		NumRetries:                    wrapperspb.UInt32(defaultNumRetries),
		HostSelectionRetryMaxAttempts: hostSelectionRetryAttempts,
		RetryHostPredicate: []*route.RetryPolicy_RetryHostPredicate{{
			Name:       previousHostsPredicate,
			ConfigType: &route.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: ph},
		}},
	}
	if in == nil {
		return out
	}
	out.NumRetries = wrapperspb.UInt32(uint32(in.GetAttempts()))
	out.PerTryTimeout = in.GetPerTryTimeout()
	if in.GetRetryOn() != "" {
		var conds []string
		var codes []uint32
		for _, part := range strings.Split(in.GetRetryOn(), ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if n, err := strconv.Atoi(part); err == nil && http.StatusText(n) != "" {
				codes = append(codes, uint32(n))
			} else {
				conds = append(conds, part)
			}
		}
		out.RetryOn = strings.Join(conds, ",")
		out.RetriableStatusCodes = codes
		if len(codes) > 0 && !strings.Contains(out.RetryOn, "retriable-status-codes") {
			// Istio appends ",retriable-status-codes" even to an empty list; the leading
			// comma is left out here.
			out.RetryOn = strings.TrimPrefix(out.RetryOn+",retriable-status-codes", ",")
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
