// Package httpconn is the proxy's HTTP connection manager (envoy.filters.network.
// http_connection_manager) with the fault and router filters: it serves HTTP/1.1 on a
// downstream connection, picks a virtual host and route from an inline or RDS route
// configuration (path, header, query parameter and runtime fraction matchers), and
// forwards the request to the route's cluster (weighted clusters, rewrites, header
// mutations, timeouts, retries, mirrors) or answers it (direct response, redirect), with
// Envoy's headers, local replies, response flags, access logs and stats.
package httpconn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/fault"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/rbac"
	"github.com/meshlab/meshlab/dataplane/proxy/fraction"
)

// defaultMaxDirectResponseBody is Envoy's max_direct_response_body_size_bytes default.
const defaultMaxDirectResponseBody = 4096

// stripPort removes a ":port" from an authority (bracketed IPv6 literals kept whole).
func stripPort(host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.LastIndexByte(host, ']') > i {
		return host
	}
	for _, c := range host[i+1:] {
		if c < '0' || c > '9' {
			return host
		}
	}
	return host[:i]
}

// DefaultRouteTimeout is Envoy's route timeout when the field is unset.
const DefaultRouteTimeout = 15 * time.Second

var routeAllow = fieldcheck.Allow{
	"envoy.config.route.v3.RouteConfiguration": {"name", "virtual_hosts", "validate_clusters", "ignore_port_in_host_matching", "max_direct_response_body_size_bytes"},
	"envoy.config.route.v3.VirtualHost": {"name", "domains", "routes", "retry_policy", "include_request_attempt_count", "typed_per_filter_config",
		"request_headers_to_add", "request_headers_to_remove", "response_headers_to_add", "response_headers_to_remove"},
	"envoy.config.route.v3.Route": {"name", "match", "route", "redirect", "direct_response", "metadata", "decorator", "typed_per_filter_config",
		"request_headers_to_add", "request_headers_to_remove", "response_headers_to_add", "response_headers_to_remove"},
	"envoy.type.matcher.v3.RegexMatcher": {"regex", "google_re2"},
	"envoy.config.route.v3.RouteAction": {"cluster", "weighted_clusters", "timeout", "retry_policy", "prefix_rewrite", "regex_rewrite",
		"host_rewrite_literal", "request_mirror_policies", "max_stream_duration", "max_grpc_timeout", "upgrade_configs",
		"cluster_not_found_response_code"},
	"envoy.config.route.v3.RouteAction.MaxStreamDuration": {"max_stream_duration", "grpc_timeout_header_max"},
	"envoy.config.route.v3.RouteAction.UpgradeConfig":     {"upgrade_type", "enabled", "connect_config"},
	// connect_config's proxy_protocol_config and allow_post are refused.
	"envoy.config.route.v3.RouteAction.UpgradeConfig.ConnectConfig": {},
	"envoy.config.route.v3.WeightedCluster":                         {"clusters", "total_weight"},
	"envoy.config.route.v3.WeightedCluster.ClusterWeight":           {"name", "weight", "host_rewrite_literal", "request_headers_to_add", "request_headers_to_remove", "response_headers_to_add", "response_headers_to_remove"},
	"envoy.config.route.v3.DirectResponseAction":                    {"status", "body"},
	"envoy.config.core.v3.DataSource":                               {"inline_string", "inline_bytes"},
	"envoy.config.route.v3.RetryPolicy":                             {"retry_on", "num_retries", "per_try_timeout", "retry_host_predicate", "host_selection_retry_max_attempts", "retriable_status_codes", "retry_back_off"},
	"envoy.config.route.v3.RetryPolicy.RetryBackOff":                {"base_interval", "max_interval"},
	"envoy.config.route.v3.RetryPolicy.RetryHostPredicate":          {"name", "typed_config"},
	"envoy.config.route.v3.RedirectAction":                          {"https_redirect", "scheme_redirect", "host_redirect", "port_redirect", "path_redirect", "prefix_rewrite", "response_code", "strip_query"},
	"envoy.config.route.v3.RouteAction.RequestMirrorPolicy":         {"cluster", "runtime_fraction", "trace_sampled"},
	"envoy.type.matcher.v3.RegexMatchAndSubstitute":                 {"pattern", "substitution"},
	"envoy.config.core.v3.HeaderValueOption":                        {"header", "append", "append_action", "keep_empty_value"},
	"envoy.config.core.v3.HeaderValue":                              {"key", "value"},
}.Merge(matchAllow)

// RouteTable is a compiled RouteConfiguration. Immutable.
type RouteTable struct {
	Name string
	// exact maps each exact domain to its virtual host's index in vhostOrder: it depends
	// on the domains alone, so the route cache gives a compile whose domains did not
	// change the last one's map (never written once built).
	exact      map[string]int
	suffixes   []wildcard // "*.foo.com", longest first
	prefixes   []wildcard // "foo.*", longest first
	defaultVH  *VirtualHost
	vhostOrder []*VirtualHost
	ignorePort bool // ignore_port_in_host_matching
}

type wildcard struct {
	affix string
	vh    *VirtualHost
}

// VirtualHost is a compiled virtual host.
type VirtualHost struct {
	Name    string
	Routes  []*Route
	Retry   *RetryPolicy // the default for routes without one
	Headers headerMutations
	// AttemptCount is include_request_attempt_count: each upstream attempt carries
	// x-envoy-attempt-count with its 1-based number (Istio sets it on every sidecar route).
	AttemptCount bool
}

// Route is one compiled route.
type Route struct {
	Name          string
	kind          matchKind
	value         string
	re            *regexp.Regexp
	caseSensitive bool
	headers       []*headerMatcher
	query         []*queryMatcher
	metadata      []func(map[string]*structpb.Struct) bool // dynamic_metadata
	fraction      *fraction.Fraction

	// Operation is the route's decorator operation: the name of its requests' spans;
	// NoPropagate is decorator.propagate false (x-envoy-decorator-operation not sent).
	Operation   string
	NoPropagate bool
	Cluster     string
	Weighted    []WeightedCluster
	Timeout     time.Duration // 0 disables the timeout
	Direct      *DirectResponse
	Redirect    *Redirect
	Retry       *RetryPolicy
	Mirrors     []Mirror
	Rewrite     rewrite
	Headers     headerMutations
	// Faults holds typed_per_filter_config entries for fault filters, by filter name.
	Faults map[string]*fault.Config
	// CORS is the route's typed_per_filter_config CORS policy, nil for none.
	CORS *CORSPolicy
	// Upgrades is the route's upgrade_configs, overriding the HCM's per type; nil: none.
	Upgrades map[string]bool
	// ConnectTerminate is a CONNECT upgrade_config with connect_config: the proxy answers
	// the CONNECT itself and carries the stream's bytes over a TCP connection to the
	// cluster's host (connect.go).
	ConnectTerminate bool
	// GRPCTimeoutMax, when set, makes a gRPC request's grpc-timeout header its timeout,
	// capped by the value (0: no cap): max_grpc_timeout or
	// max_stream_duration.grpc_timeout_header_max.
	GRPCTimeoutMax *time.Duration
	// ClusterNotFoundCode is cluster_not_found_response_code: the status of the local
	// reply when the route's cluster does not exist (Envoy's default 503).
	ClusterNotFoundCode int
}

// WeightedCluster is one target of weighted_clusters.
type WeightedCluster struct {
	Name        string
	Weight      uint32
	Headers     headerMutations
	HostRewrite string // host_rewrite_literal, overriding the route's
}

// DirectResponse is a route's direct_response.
type DirectResponse struct {
	Status int
	Body   string
}

type matchKind int

const (
	matchPrefix matchKind = iota
	matchPath
	matchRegex
	// matchConnect is connect_matcher: any CONNECT request (which has no :path), and no
	// other.
	matchConnect
)

// CompileRoutes validates rc and compiles it, refusing fields the proxy does not implement.
func CompileRoutes(rc *routev3.RouteConfiguration) (*RouteTable, error) {
	if rc == nil {
		return nil, errors.New("route configuration is empty")
	}
	if err := rc.ValidateAll(); err != nil {
		return nil, fmt.Errorf("route configuration '%s': %w", rc.GetName(), err)
	}
	if err := routeAllow.Check(rc); err != nil {
		return nil, fmt.Errorf("route configuration '%s': %w", rc.GetName(), err)
	}
	maxBody := maxDirectResponseBody(rc)
	t := newRouteTable(rc, nil)
	for i, pvh := range rc.GetVirtualHosts() {
		vh, err := compileVirtualHost(pvh, maxBody)
		if err != nil {
			return nil, fmt.Errorf("route configuration '%s': virtual_hosts[%d].%w", rc.GetName(), i, err)
		}
		if err := t.add(rc.GetName(), pvh.GetDomains(), vh, false); err != nil {
			return nil, err
		}
	}
	t.sortWildcards()
	return t, nil
}

// maxDirectResponseBody is rc's max_direct_response_body_size_bytes, or Envoy's default.
func maxDirectResponseBody(rc *routev3.RouteConfiguration) uint32 {
	if v := rc.GetMaxDirectResponseBodySizeBytes(); v != nil {
		return v.GetValue()
	}
	return defaultMaxDirectResponseBody
}

// compileVirtualHost compiles one virtual host of a checked route configuration whose
// direct responses may carry up to maxBody bytes. It depends on nothing else, so a
// compiled virtual host can serve every table whose configuration has it unchanged
// (RouteCache). Its errors name the field from the virtual host down.
func compileVirtualHost(pvh *routev3.VirtualHost, maxBody uint32) (*VirtualHost, error) {
	vh := &VirtualHost{Name: pvh.GetName(), AttemptCount: pvh.GetIncludeRequestAttemptCount()}
	var err error
	if vh.Headers, err = compileHeaderMutations(pvh.GetRequestHeadersToAdd(), pvh.GetRequestHeadersToRemove(), pvh.GetResponseHeadersToAdd(), pvh.GetResponseHeadersToRemove()); err != nil {
		return nil, err
	}
	if pvh.GetRetryPolicy() != nil {
		if vh.Retry, err = compileRetryPolicy(pvh.GetRetryPolicy()); err != nil {
			return nil, fmt.Errorf("retry_policy.%w", err)
		}
	}
	vhCORS, vhFaults, err := compilePerFilterConfigs(pvh.GetTypedPerFilterConfig())
	if err != nil {
		return nil, err
	}
	for j, pr := range pvh.GetRoutes() {
		r, err := compileRoute(pr, vh)
		if err != nil {
			return nil, fmt.Errorf("routes[%d].%w", j, err)
		}
		r.inheritPerFilter(vhCORS, vhFaults)
		if r.Direct != nil && len(r.Direct.Body) > int(maxBody) {
			return nil, fmt.Errorf("routes[%d].direct_response.body: response body size is %d bytes; maximum is %d", j, len(r.Direct.Body), maxBody)
		}
		vh.Routes = append(vh.Routes, r)
	}
	return vh, nil
}

// newRouteTable returns rc's table without virtual hosts (add adds them), its maps
// sized for rc's domains; with exact, the exact domains' map of a table of the same
// domains, which add then leaves as it is.
func newRouteTable(rc *routev3.RouteConfiguration, exact map[string]int) *RouteTable {
	if exact == nil {
		n := 0
		for _, pvh := range rc.GetVirtualHosts() {
			n += len(pvh.GetDomains())
		}
		exact = make(map[string]int, n)
	}
	return &RouteTable{
		Name: rc.GetName(), ignorePort: rc.GetIgnorePortInHostMatching(),
		exact:      exact,
		vhostOrder: make([]*VirtualHost, 0, len(rc.GetVirtualHosts())),
	}
}

// add indexes the compiled virtual host vh of the route configuration rcName by its
// domains; a domain an earlier virtual host has is refused, as Envoy refuses it. With
// indexed, the exact domains are in the map already (newRouteTable's exact, built from
// these domains and checked then): only the wildcards are indexed.
func (t *RouteTable) add(rcName string, domains []string, vh *VirtualHost, indexed bool) error {
	for _, d := range domains {
		if indexed && d != "*" && !strings.HasPrefix(d, "*") && !strings.HasSuffix(d, "*") {
			continue // an exact domain
		}
		d = strings.ToLower(d)
		if t.has(d) {
			return fmt.Errorf("route configuration '%s': only unique values for domains are permitted. Duplicate entry of domain %s in route %s", rcName, d, rcName)
		}
		switch {
		case d == "*":
			t.defaultVH = vh
		case strings.HasPrefix(d, "*"):
			t.suffixes = append(t.suffixes, wildcard{affix: d[1:], vh: vh})
		case strings.HasSuffix(d, "*"):
			t.prefixes = append(t.prefixes, wildcard{affix: d[:len(d)-1], vh: vh})
		default:
			t.exact[d] = len(t.vhostOrder)
		}
	}
	t.vhostOrder = append(t.vhostOrder, vh)
	return nil
}

// has reports whether a virtual host added already has the (lower-case) domain d. The
// table's own indexes answer it: a set of every domain seen cost a second map as large
// as exact on every compile of a route configuration (issue 30), and wildcard domains
// are few.
func (t *RouteTable) has(d string) bool {
	switch {
	case d == "*":
		return t.defaultVH != nil
	case strings.HasPrefix(d, "*"):
		return slices.ContainsFunc(t.suffixes, func(w wildcard) bool { return w.affix == d[1:] })
	case strings.HasSuffix(d, "*"):
		return slices.ContainsFunc(t.prefixes, func(w wildcard) bool { return w.affix == d[:len(d)-1] })
	}
	_, ok := t.exact[d]
	return ok
}

// sortWildcards puts the longest wildcards first, once every virtual host is added.
func (t *RouteTable) sortWildcards() {
	byLen := func(ws []wildcard) {
		sort.SliceStable(ws, func(i, j int) bool { return len(ws[i].affix) > len(ws[j].affix) })
	}
	byLen(t.suffixes)
	byLen(t.prefixes)
}

func compileRoute(pr *routev3.Route, vh *VirtualHost) (*Route, error) {
	r := &Route{Name: pr.GetName(), caseSensitive: true, Operation: pr.GetDecorator().GetOperation(),
		NoPropagate: pr.GetDecorator().GetPropagate() != nil && !pr.GetDecorator().GetPropagate().GetValue()}
	m := pr.GetMatch()
	if cs := m.GetCaseSensitive(); cs != nil {
		r.caseSensitive = cs.GetValue()
	}
	for i, h := range m.GetHeaders() {
		hm, err := compileHeaderMatcher(h)
		if err != nil {
			return nil, fmt.Errorf("match.headers[%d].%w", i, err)
		}
		r.headers = append(r.headers, hm)
	}
	for i, md := range m.GetDynamicMetadata() {
		mm, err := rbac.CompileMetadataMatcher(md)
		if err != nil {
			return nil, fmt.Errorf("match.dynamic_metadata[%d].%w", i, err)
		}
		r.metadata = append(r.metadata, mm)
	}
	for i, q := range m.GetQueryParameters() {
		qm, err := compileQueryMatcher(q)
		if err != nil {
			return nil, fmt.Errorf("match.query_parameters[%d].%w", i, err)
		}
		r.query = append(r.query, qm)
	}
	r.fraction = runtimeFraction(m.GetRuntimeFraction())
	if err := r.compileActions(pr, vh); err != nil {
		return nil, err
	}
	switch {
	case m.GetConnectMatcher() != nil:
		r.kind = matchConnect
	case m.GetSafeRegex() != nil:
		re, err := compileRegex(m.GetSafeRegex().GetRegex())
		if err != nil {
			return nil, fmt.Errorf("match.safe_regex.regex: %w", err)
		}
		r.kind, r.re = matchRegex, re
	case m.GetPathSpecifier() == nil:
		return nil, errors.New("match: no path specifier set")
	default:
		if p, ok := m.GetPathSpecifier().(*routev3.RouteMatch_Path); ok {
			r.kind, r.value = matchPath, p.Path
		} else {
			r.kind, r.value = matchPrefix, m.GetPrefix()
		}
		if !r.caseSensitive {
			r.value = strings.ToLower(r.value)
		}
	}
	return r, nil
}

// VirtualHostFor selects the virtual host for an authority as Envoy does: exact domain,
// then the longest suffix wildcard ("*.foo.com"), then the longest prefix wildcard
// ("foo.*"), then "*". A wildcard never matches an empty remainder. The port is part of
// the authority (Envoy's ignore_port_in_host_matching is false by default).
func (t *RouteTable) VirtualHostFor(host string) *VirtualHost {
	host = strings.ToLower(host)
	if t.ignorePort {
		host = stripPort(host)
	}
	if i, ok := t.exact[host]; ok {
		return t.vhostOrder[i]
	}
	for _, w := range t.suffixes {
		if len(host) > len(w.affix) && strings.HasSuffix(host, w.affix) {
			return w.vh
		}
	}
	for _, w := range t.prefixes {
		if len(host) > len(w.affix) && strings.HasPrefix(host, w.affix) {
			return w.vh
		}
	}
	return t.defaultVH
}

// Match returns the first route of the selected virtual host matching a request with
// this authority and path (the raw :path, query included) and no headers, or nil when
// none does (Envoy's NR).
func (t *RouteTable) Match(host, path string) (*VirtualHost, *Route) {
	return t.MatchRequest(&Request{Method: "GET", Authority: host, Path: path, Scheme: "http", Header: http.Header{}})
}

// MatchRequest returns the first route of the selected virtual host whose path, header,
// query parameter and runtime fraction matchers all match r, or nil (Envoy's NR).
func (t *RouteTable) MatchRequest(r *Request) (*VirtualHost, *Route) {
	vh := t.VirtualHostFor(r.Authority)
	if vh == nil {
		return nil, nil
	}
	var query url.Values
	connect := r.Method == http.MethodConnect
	for _, rt := range vh.Routes {
		if rt.kind == matchConnect && !connect {
			continue
		}
		if rt.kind != matchConnect && !rt.matchesPath(r.Path) {
			continue
		}
		if !rt.matchesRest(r, &query) {
			continue
		}
		return vh, rt
	}
	return vh, nil
}

func (r *Route) matchesRest(req *Request, query *url.Values) bool {
	for _, h := range r.headers {
		if !h.match(req) {
			return false
		}
	}
	for _, m := range r.metadata {
		if !m(req.Metadata) {
			return false
		}
	}
	if len(r.query) > 0 {
		if *query == nil {
			*query = parseQuery(req.Path)
		}
		for _, q := range r.query {
			if !q.match(*query) {
				return false
			}
		}
	}
	return r.fraction == nil || r.fraction.Sample()
}

func parseQuery(path string) url.Values {
	i := strings.IndexByte(path, '?')
	if i < 0 {
		return url.Values{}
	}
	q := path[i+1:]
	if j := strings.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	v, _ := url.ParseQuery(q)
	if v == nil {
		v = url.Values{}
	}
	return v
}

func (r *Route) matchesPath(path string) bool {
	switch r.kind {
	case matchRegex:
		return r.re.MatchString(stripQuery(path))
	case matchPath:
		p := stripQuery(path)
		if !r.caseSensitive {
			return strings.EqualFold(p, r.value)
		}
		return p == r.value
	}
	if !r.caseSensitive {
		return strings.HasPrefix(strings.ToLower(path), r.value)
	}
	return strings.HasPrefix(path, r.value)
}

func stripQuery(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// PickCluster returns the route's cluster, choosing among weighted clusters at random in
// proportion to their weights.
func (r *Route) PickCluster() string {
	name, _ := r.pick()
	return name
}

// pick is Envoy's weighted pick: a random value modulo the total weight selects the
// first cluster whose cumulative weight exceeds it.
func (r *Route) pick() (string, *WeightedCluster) {
	if len(r.Weighted) == 0 {
		return r.Cluster, nil
	}
	var total uint64
	for _, w := range r.Weighted {
		total += uint64(w.Weight)
	}
	if total == 0 {
		return r.Weighted[0].Name, &r.Weighted[0]
	}
	n := rand.Uint64N(total)
	for i := range r.Weighted {
		w := &r.Weighted[i]
		if n < uint64(w.Weight) {
			return w.Name, w
		}
		n -= uint64(w.Weight)
	}
	last := &r.Weighted[len(r.Weighted)-1]
	return last.Name, last
}

// RouteStore holds the route configurations RDS delivered, by name. Safe for
// concurrent use.
type RouteStore struct {
	mu     sync.RWMutex
	tables map[string]*RouteTable
}

// NewRouteStore returns an empty RouteStore.
func NewRouteStore() *RouteStore { return &RouteStore{tables: map[string]*RouteTable{}} }

// Get returns the named route table.
func (s *RouteStore) Get(name string) (*RouteTable, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tables[name]
	return t, ok
}

// Replace sets the tables (state of the world for the subscribed names).
func (s *RouteStore) Replace(tables map[string]*RouteTable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables = tables
}
