package httpconn

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/fault"
	"github.com/meshlab/meshlab/dataplane/proxy/fraction"
)

// Redirect is a compiled RedirectAction.
type Redirect struct {
	Scheme, Host string
	Port         uint32
	Path, Prefix string
	Code         int
	StripQuery   bool
}

// Mirror is one request_mirror_policies entry.
type Mirror struct {
	Cluster  string
	Fraction *fraction.Fraction // nil: every request
}

// rewrite is a route's path and authority rewriting.
type rewrite struct {
	prefix    *string
	regex     *regexp.Regexp
	regexSubs string
	host      string
}

var redirectCodes = map[routev3.RedirectAction_RedirectResponseCode]int{
	routev3.RedirectAction_MOVED_PERMANENTLY:  301,
	routev3.RedirectAction_FOUND:              302,
	routev3.RedirectAction_SEE_OTHER:          303,
	routev3.RedirectAction_TEMPORARY_REDIRECT: 307,
	routev3.RedirectAction_PERMANENT_REDIRECT: 308,
}

func (r *Route) compileActions(pr *routev3.Route, vh *VirtualHost) error {
	var err error
	if r.Headers, err = compileHeaderMutations(pr.GetRequestHeadersToAdd(), pr.GetRequestHeadersToRemove(), pr.GetResponseHeadersToAdd(), pr.GetResponseHeadersToRemove()); err != nil {
		return err
	}
	if r.CORS, r.Faults, err = compilePerFilterConfigs(pr.GetTypedPerFilterConfig()); err != nil {
		return err
	}
	switch {
	case pr.GetDirectResponse() != nil:
		dr := pr.GetDirectResponse()
		body := dr.GetBody().GetInlineString()
		if b := dr.GetBody().GetInlineBytes(); b != nil {
			body = string(b)
		}
		r.Direct = &DirectResponse{Status: int(dr.GetStatus()), Body: body}
	case pr.GetRedirect() != nil:
		rd := pr.GetRedirect()
		r.Redirect = &Redirect{Scheme: rd.GetSchemeRedirect(), Host: rd.GetHostRedirect(), Port: rd.GetPortRedirect(),
			Path: rd.GetPathRedirect(), Code: redirectCodes[rd.GetResponseCode()], StripQuery: rd.GetStripQuery()}
		if rd.GetHttpsRedirect() {
			r.Redirect.Scheme = "https"
		}
		if p, ok := rd.GetPathRewriteSpecifier().(*routev3.RedirectAction_PrefixRewrite); ok {
			r.Redirect.Prefix = p.PrefixRewrite
			r.Rewrite.prefix = &p.PrefixRewrite
		}
	case pr.GetRoute() != nil:
		return r.compileRouteAction(pr.GetRoute(), vh)
	default:
		return errors.New("action: only route, redirect and direct_response are supported")
	}
	return nil
}

func (r *Route) compileRouteAction(a *routev3.RouteAction, vh *VirtualHost) error {
	r.Timeout = DefaultRouteTimeout
	if a.GetTimeout() != nil {
		r.Timeout = a.GetTimeout().AsDuration()
	}
	if d := a.GetMaxStreamDuration().GetMaxStreamDuration(); d != nil {
		// max_stream_duration bounds the whole stream as the route timeout does.
		if md := d.AsDuration(); md > 0 && (r.Timeout == 0 || md < r.Timeout) {
			r.Timeout = md
		}
	}
	if v := a.GetMaxGrpcTimeout(); v != nil { //nolint:staticcheck // Envoy still honours the deprecated max_grpc_timeout
		d := v.AsDuration()
		r.GRPCTimeoutMax = &d
	}
	if v := a.GetMaxStreamDuration().GetGrpcTimeoutHeaderMax(); v != nil {
		d := v.AsDuration()
		r.GRPCTimeoutMax = &d
	}
	for i, u := range a.GetUpgradeConfigs() {
		t := strings.ToLower(u.GetUpgradeType())
		switch {
		case t == UpgradeConnect && u.GetConnectConfig() == nil:
			// Without connect_config Envoy sends the CONNECT on upstream as a request.
			return fmt.Errorf("route.upgrade_configs[%d].connect_config: required by meshlab proxy for CONNECT (it terminates CONNECT; proxying it upstream is not implemented)", i)
		case t == UpgradeConnect:
			r.ConnectTerminate = true
		case t != "websocket":
			return fmt.Errorf("route.upgrade_configs[%d].upgrade_type: only websocket and CONNECT upgrades are supported by meshlab proxy, not %q", i, u.GetUpgradeType())
		case u.GetConnectConfig() != nil:
			return fmt.Errorf("route.upgrade_configs[%d].connect_config: only for CONNECT", i)
		}
		if r.Upgrades == nil {
			r.Upgrades = map[string]bool{}
		}
		r.Upgrades[t] = u.GetEnabled() == nil || u.GetEnabled().GetValue()
	}
	switch a.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_SERVICE_UNAVAILABLE:
		r.ClusterNotFoundCode = http.StatusServiceUnavailable
	case routev3.RouteAction_NOT_FOUND:
		r.ClusterNotFoundCode = http.StatusNotFound
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		r.ClusterNotFoundCode = http.StatusInternalServerError
	default:
		return fmt.Errorf("route.cluster_not_found_response_code: unknown code %s", a.GetClusterNotFoundResponseCode())
	}
	r.Cluster = a.GetCluster()
	for i, w := range a.GetWeightedClusters().GetClusters() {
		hm, err := compileHeaderMutations(w.GetRequestHeadersToAdd(), w.GetRequestHeadersToRemove(), w.GetResponseHeadersToAdd(), w.GetResponseHeadersToRemove())
		if err != nil {
			return fmt.Errorf("route.weighted_clusters.clusters[%d].%w", i, err)
		}
		r.Weighted = append(r.Weighted, WeightedCluster{Name: w.GetName(), Weight: w.GetWeight().GetValue(), Headers: hm, HostRewrite: w.GetHostRewriteLiteral()})
	}
	if tw := a.GetWeightedClusters().GetTotalWeight(); tw != nil { //nolint:staticcheck // Envoy still checks the deprecated total_weight
		var sum uint64
		for _, w := range r.Weighted {
			sum += uint64(w.Weight)
		}
		if sum != uint64(tw.GetValue()) {
			return fmt.Errorf("route.weighted_clusters: sum of weights in the weighted_cluster must add up to %d", tw.GetValue())
		}
	}
	if r.Cluster == "" && len(r.Weighted) == 0 {
		return errors.New("route: only cluster and weighted_clusters are supported")
	}
	var err error
	r.Retry = vh.Retry
	if a.GetRetryPolicy() != nil {
		if r.Retry, err = compileRetryPolicy(a.GetRetryPolicy()); err != nil {
			return fmt.Errorf("route.retry_policy.%w", err)
		}
	}
	if p := a.GetPrefixRewrite(); p != "" {
		r.Rewrite.prefix = &p
	}
	if rr := a.GetRegexRewrite(); rr != nil {
		re, err := regexp.Compile(rr.GetPattern().GetRegex())
		if err != nil {
			return fmt.Errorf("route.regex_rewrite.pattern.regex: %w", err)
		}
		r.Rewrite.regex, r.Rewrite.regexSubs = re, re2Substitution(rr.GetSubstitution())
	}
	r.Rewrite.host = a.GetHostRewriteLiteral()
	for i, m := range a.GetRequestMirrorPolicies() {
		if m.GetCluster() == "" {
			return fmt.Errorf("route.request_mirror_policies[%d].cluster: only a named cluster is supported", i)
		}
		r.Mirrors = append(r.Mirrors, Mirror{Cluster: m.GetCluster(), Fraction: runtimeFraction(m.GetRuntimeFraction())})
	}
	return nil
}

// re2Substitution converts RE2 "\1" back-references to Go's "${1}".
func re2Substitution(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
			b.WriteString("${" + string(s[i+1]) + "}")
			i++
			continue
		}
		if s[i] == '$' {
			b.WriteString("$$")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// compilePerFilterConfigs compiles a route's or virtual host's typed_per_filter_config:
// CORS policies and fault overrides by filter name.
func compilePerFilterConfigs(m map[string]*anypb.Any) (*CORSPolicy, map[string]*fault.Config, error) {
	var cors *CORSPolicy
	var faults map[string]*fault.Config
	for name, a := range m {
		if isCORSPolicy(a) {
			p, err := compileCORSPolicy(a)
			if err != nil {
				return nil, nil, fmt.Errorf("typed_per_filter_config[%s].%w", name, err)
			}
			cors = p
			continue
		}
		c, err := compilePerFilter(a)
		if err != nil {
			return nil, nil, fmt.Errorf("typed_per_filter_config[%s]: %w", name, err)
		}
		if faults == nil {
			faults = map[string]*fault.Config{}
		}
		faults[name] = c
	}
	return cors, faults, nil
}

// inheritPerFilter gives the route its virtual host's per-filter configs where it has
// none of its own: Envoy uses the most specific one (route, then virtual host).
func (r *Route) inheritPerFilter(cors *CORSPolicy, faults map[string]*fault.Config) {
	if r.CORS == nil {
		r.CORS = cors
	}
	for name, f := range faults {
		if _, ok := r.Faults[name]; ok {
			continue
		}
		if r.Faults == nil {
			r.Faults = map[string]*fault.Config{}
		}
		r.Faults[name] = f
	}
}

func compilePerFilter(a *anypb.Any) (*fault.Config, error) {
	var f faultv3.HTTPFault
	if a.MessageName() != f.ProtoReflect().Descriptor().FullName() {
		return nil, fmt.Errorf("unsupported per-filter config type %s", a.MessageName())
	}
	if err := a.UnmarshalTo(&f); err != nil {
		return nil, err
	}
	return fault.CompileProto(&f)
}

// applyPath returns the upstream :path after prefix_rewrite or regex_rewrite, and
// whether it changed.
func (r *Route) applyPath(path string) (string, bool) {
	switch {
	case r.Rewrite.prefix != nil:
		n := r.matchedPrefixLen(path)
		return *r.Rewrite.prefix + path[n:], true
	case r.Rewrite.regex != nil:
		p, q := path, ""
		if i := strings.IndexByte(path, '?'); i >= 0 {
			p, q = path[:i], path[i:]
		}
		return r.Rewrite.regex.ReplaceAllString(p, r.Rewrite.regexSubs) + q, true
	}
	return path, false
}

// matchedPrefixLen is the length of the path part the route matched: the prefix, or the
// whole path (query excluded) for path and regex matches.
func (r *Route) matchedPrefixLen(path string) int {
	if r.kind == matchPrefix {
		return min(len(r.value), len(path))
	}
	return len(stripQuery(path))
}

// RetryPolicy is a compiled route or virtual host retry_policy.
type RetryPolicy struct {
	On            retryOn
	StatusCodes   map[int]bool
	NumRetries    int
	PerTryTimeout time.Duration // 0: none
	BaseInterval  time.Duration
	MaxInterval   time.Duration
	PreviousHosts bool
	HostAttempts  int
}

type retryOn uint32

const (
	retry5xx retryOn = 1 << iota
	retryGatewayError
	retryReset
	retryResetBeforeRequest
	retryConnectFailure
	retryRetriable4xx
	retryRefusedStream
	retryStatusCodes
	retryEnvoyRateLimited
	retryGRPCCancelled
	retryGRPCDeadline
	retryGRPCResourceExhausted
	retryGRPCUnavailable
	retryGRPCInternal
	retryHTTP3PostConnect
)

var retryOnNames = map[string]retryOn{
	"5xx": retry5xx, "gateway-error": retryGatewayError, "reset": retryReset, "reset-before-request": retryResetBeforeRequest,
	"connect-failure": retryConnectFailure, "retriable-4xx": retryRetriable4xx, "refused-stream": retryRefusedStream,
	"retriable-status-codes": retryStatusCodes, "envoy-ratelimited": retryEnvoyRateLimited,
	"cancelled": retryGRPCCancelled, "deadline-exceeded": retryGRPCDeadline, "resource-exhausted": retryGRPCResourceExhausted,
	"unavailable": retryGRPCUnavailable, "internal": retryGRPCInternal, "http3-post-connect-failure": retryHTTP3PostConnect,
}

const previousHostsPredicate = "envoy.retry_host_predicates.previous_hosts"

func compileRetryPolicy(p *routev3.RetryPolicy) (*RetryPolicy, error) {
	rp := &RetryPolicy{NumRetries: 1, BaseInterval: 25 * time.Millisecond, StatusCodes: map[int]bool{}, HostAttempts: int(p.GetHostSelectionRetryMaxAttempts())}
	for _, tok := range strings.Split(p.GetRetryOn(), ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		bit, ok := retryOnNames[tok]
		if !ok {
			return nil, fmt.Errorf("retry_on: unsupported retry condition %q", tok)
		}
		rp.On |= bit
	}
	if n := p.GetNumRetries(); n != nil {
		rp.NumRetries = int(n.GetValue())
	}
	if d := p.GetPerTryTimeout(); d != nil {
		rp.PerTryTimeout = d.AsDuration()
	}
	for _, c := range p.GetRetriableStatusCodes() {
		rp.StatusCodes[int(c)] = true
	}
	if b := p.GetRetryBackOff(); b != nil {
		rp.BaseInterval = b.GetBaseInterval().AsDuration()
		if b.GetMaxInterval() != nil {
			rp.MaxInterval = b.GetMaxInterval().AsDuration()
			if rp.MaxInterval < rp.BaseInterval {
				return nil, errors.New("retry_back_off.max_interval: must be greater than or equal to the base_interval")
			}
		}
	}
	if rp.MaxInterval == 0 {
		rp.MaxInterval = 10 * rp.BaseInterval
	}
	for i, hp := range p.GetRetryHostPredicate() {
		if hp.GetName() != previousHostsPredicate {
			return nil, fmt.Errorf("retry_host_predicate[%d].name: unsupported predicate %s", i, hp.GetName())
		}
		if tc := hp.GetTypedConfig(); tc != nil {
			var ph previoushostsv3.PreviousHostsPredicate
			if err := tc.UnmarshalTo(&ph); err != nil {
				return nil, fmt.Errorf("retry_host_predicate[%d].typed_config: %w", i, err)
			}
		}
		rp.PreviousHosts = true
	}
	return rp, nil
}

// retriableStatus reports whether a response with this status and headers is retried.
func (p *RetryPolicy) retriableStatus(code int, h http.Header) bool {
	switch {
	case p.On&retry5xx != 0 && code >= 500 && code <= 599,
		p.On&retryGatewayError != 0 && (code == 502 || code == 503 || code == 504),
		p.On&retryRetriable4xx != 0 && code == 409,
		p.On&retryStatusCodes != 0 && p.StatusCodes[code],
		p.On&retryEnvoyRateLimited != 0 && h.Get("X-Envoy-Ratelimited") != "":
		return true
	}
	gs := h.Get("Grpc-Status")
	switch {
	case gs == "":
		return false
	case p.On&retryGRPCCancelled != 0 && gs == "1",
		p.On&retryGRPCDeadline != 0 && gs == "4",
		p.On&retryGRPCResourceExhausted != 0 && gs == "8",
		p.On&retryGRPCInternal != 0 && gs == "13",
		p.On&retryGRPCUnavailable != 0 && gs == "14":
		return true
	}
	return false
}

// retriableReset reports whether an upstream failure without a response is retried, as
// Envoy's wouldRetryFromReset: 5xx, gateway-error and reset retry every reset (and
// per-try timeouts); connect-failure and reset-before-request retry connect failures.
func (p *RetryPolicy) retriableReset(connectFailure bool) bool {
	if p.On&(retry5xx|retryGatewayError|retryReset) != 0 {
		return true
	}
	return connectFailure && p.On&(retryConnectFailure|retryResetBeforeRequest) != 0
}

// headerOp is one header to add with its append action.
type headerOp struct {
	key, value string
	action     corev3.HeaderValueOption_HeaderAppendAction
	keepEmpty  bool
	// canonical is key in canonical form and values is value as header values, both
	// made once per config (see sharedValues).
	canonical string
	values    []string
}

// headerMutation is one level's headers to remove, then add.
type headerMutation struct {
	add    []headerOp
	remove []string
}

// headerMutations are a level's request and response header mutations.
type headerMutations struct {
	req, resp headerMutation
}

func compileHeaderMutations(reqAdd []*corev3.HeaderValueOption, reqRemove []string, respAdd []*corev3.HeaderValueOption, respRemove []string) (headerMutations, error) {
	var m headerMutations
	var err error
	if m.req, err = compileHeaderMutation(reqAdd, reqRemove, "request_headers_to_add"); err != nil {
		return m, err
	}
	m.resp, err = compileHeaderMutation(respAdd, respRemove, "response_headers_to_add")
	return m, err
}

func compileHeaderMutation(add []*corev3.HeaderValueOption, remove []string, field string) (headerMutation, error) {
	hm := headerMutation{remove: remove}
	for i, o := range add {
		v := o.GetHeader().GetValue()
		if strings.Contains(strings.ReplaceAll(v, "%%", ""), "%") {
			return hm, fmt.Errorf("%s[%d].header.value: command operators in header values are not supported by meshlab proxy", field, i)
		}
		op := headerOp{key: o.GetHeader().GetKey(), value: strings.ReplaceAll(v, "%%", "%"), action: o.GetAppendAction(), keepEmpty: o.GetKeepEmptyValue()}
		if a := o.GetAppend(); a != nil { //nolint:staticcheck // Envoy still honours the deprecated append, over append_action
			op.action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
			if a.GetValue() {
				op.action = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
			}
		}
		op.canonical, op.values = http.CanonicalHeaderKey(op.key), sharedValues(op.value)
		hm.add = append(hm.add, op)
	}
	return hm, nil
}

// apply removes, then adds, as Envoy's HeaderParser does. Host is the authority.
func (m *headerMutation) apply(h http.Header, host *string) {
	for _, k := range m.remove {
		h.Del(k)
	}
	for _, op := range m.add {
		if op.value == "" && !op.keepEmpty {
			continue
		}
		if host != nil && (strings.EqualFold(op.key, "host") || op.key == ":authority") {
			if op.action != corev3.HeaderValueOption_ADD_IF_ABSENT || *host == "" {
				*host = op.value
			}
			continue
		}
		old, exists := h[op.canonical]
		switch op.action {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			if exists {
				h[op.canonical] = append(old, op.value)
			} else {
				h[op.canonical] = op.values
			}
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !exists {
				h[op.canonical] = op.values
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			h[op.canonical] = op.values
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if exists {
				h[op.canonical] = op.values
			}
		}
	}
}

// timeoutFor returns the route's timeout for r: a gRPC request's grpc-timeout header
// under max_grpc_timeout or grpc_timeout_header_max, capped by it (0: no cap; a request
// without the header then has no timeout, as Envoy's FilterUtility::finalTimeout), else
// the route's timeout.
func (r *Route) timeoutFor(req *http.Request) time.Duration {
	if r.GRPCTimeoutMax == nil || !isGRPC(req) {
		return r.Timeout
	}
	max := *r.GRPCTimeoutMax
	t, _ := parseGRPCTimeout(req.Header.Get("Grpc-Timeout"))
	if max != 0 && (t == 0 || t > max) {
		t = max
	}
	return t
}

func isGRPC(req *http.Request) bool {
	ct := req.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/grpc") && (len(ct) == len("application/grpc") || ct[len("application/grpc")] == '+' || ct[len("application/grpc")] == ';')
}

// parseGRPCTimeout parses gRPC's grpc-timeout header: up to 8 digits and a unit.
func parseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}
