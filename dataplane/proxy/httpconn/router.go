package httpconn

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/fault"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/jwtauthn"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/lua"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
)

// Envoy's local reply bodies.
const (
	BodyNoHealthyUpstream = "no healthy upstream"
	BodyConnectFailure    = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
	BodyConnectReset      = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
	BodyOverflow          = "upstream connect error or disconnect/reset before headers. reset reason: overflow"
	BodyTimeout           = "upstream request timeout"
)

// Deps are what the router needs from the rest of the proxy.
type Deps struct {
	Routes   *RouteStore      // required
	Clusters *cluster.Manager // required
	Stats    *stats.Store     // required
	Logger   *slog.Logger     // required
	// Draining is closed when the listener drains (hot restart, /drain_listeners):
	// responses then carry Connection: close and idle keep-alive connections are
	// closed, as Envoy's HCM does for HTTP/1; optional.
	Draining <-chan struct{}
	// DrainClose is asked before each response once the connection may be draining; true
	// makes that response the connection's last (HTTP/1 Connection: close, HTTP/2
	// GOAWAY), as Envoy's HCM asks its drain decision (the gradual --drain-strategy);
	// optional.
	DrainClose func() bool
	// Tracer reports the spans of HCMs with a tracing provider; optional (spans are
	// then made and propagated, never reported).
	Tracer *tracing.Tracer
}

// Downstream describes the downstream connection a request arrived on.
type Downstream struct {
	Local  netip.AddrPort // the (possibly restored original) destination
	Remote netip.AddrPort
	// LocalCert is the certificate this proxy presented on a downstream TLS connection
	// (the By element of x-forwarded-client-cert); nil for plaintext.
	LocalCert *x509.Certificate
	// FilterChainName is the name of the listener filter chain that took the connection
	// (%FILTER_CHAIN_NAME%); ServerName is its TLS SNI (%REQUESTED_SERVER_NAME%). Empty
	// when unnamed or plaintext.
	FilterChainName string
	ServerName      string
	// Inbound is the listener's traffic direction: istio.stats reports as destination.
	Inbound bool
	// PeerSAN and LocalSAN are the first URI SANs of the downstream TLS peer's and the
	// local certificate ("" for plaintext), for istio.stats.
	PeerSAN, LocalSAN string
	// FilterState is the connection's filter state (set_filter_state, or shared by the
	// upstream side of an internal connection); nil for none.
	FilterState map[string]internalconn.Object
}

// router serves the requests of one downstream connection.
type router struct {
	cfg  *Config
	deps Deps
	ds   Downstream
	st   *hcmStats
	// sans is the last outbound mTLS request's SANs for istio.stats; HTTP/2 streams
	// read and replace it concurrently.
	sans atomic.Pointer[upstreamSANs]
	// rbacLog is the rbac logger, made on the first request an RBAC filter sees.
	rbacLog atomic.Pointer[slog.Logger]
}

type hcmStats struct {
	scope    stats.Scope
	rqTotal  *stats.Stat
	rqActive *stats.Stat
	rqDone   *stats.Stat
	cxTotal  *stats.Stat
	cxActive *stats.Stat
	noRoute  *stats.Stat
	noCl     *stats.Stat
	rqTime   *stats.Histogram
	codes    *stats.CodeCounters // downstream_rq_<N>xx
	fault    atomic.Pointer[fault.Stats]
	jwt      atomic.Pointer[jwtauthn.Stats]
}

// hcmStatsKey names the stats of one HCM stat_prefix in one store.
type hcmStatsKey struct {
	store  *stats.Store
	prefix string
}

// hcmStatsCache holds the resolved stats of every (store, stat_prefix), so a new
// downstream connection does no lookup by name.
var hcmStatsCache sync.Map // hcmStatsKey -> *hcmStats

func newHCMStats(store *stats.Store, prefix string) *hcmStats {
	k := hcmStatsKey{store, prefix}
	if v, ok := hcmStatsCache.Load(k); ok {
		return v.(*hcmStats)
	}
	sc := store.HTTP(prefix)
	st := &hcmStats{
		scope:    sc,
		rqTotal:  sc.Counter("downstream_rq_total"),
		rqActive: sc.Gauge("downstream_rq_active"),
		rqDone:   sc.Counter("downstream_rq_completed"),
		cxTotal:  sc.Counter("downstream_cx_total"),
		cxActive: sc.Gauge("downstream_cx_active"),
		noRoute:  sc.Counter("no_route"),
		noCl:     sc.Counter("no_cluster"),
		rqTime:   sc.Histogram("downstream_rq_time"),
		codes:    stats.NewCodeCounters(sc, "downstream_rq_"),
	}
	v, _ := hcmStatsCache.LoadOrStore(k, st)
	return v.(*hcmStats)
}

func (s *hcmStats) faults() *fault.Stats {
	if f := s.fault.Load(); f != nil {
		return f
	}
	s.fault.CompareAndSwap(nil, fault.NewStats(s.scope))
	return s.fault.Load()
}

func (s *hcmStats) record(code int) {
	s.codes.Class(code).Inc()
	s.rqDone.Inc()
}

// hopByHop are the headers Envoy never forwards (in canonical form).
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer"}

// delHopByHop removes the hop-by-hop headers from h: a map delete per name, as the
// names are canonical already (Header.Del would canonicalize each again, every request).
func delHopByHop(h http.Header) {
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// sharedValues returns a constant header value as header values made once per config
// and shared by every request: http.Header.Set allocates a one-element slice per call.
// Sharing is safe because the slice has len == cap, so an append by a later mutation
// copies it, and nothing on the proxy's path writes a header's values in place.
func sharedValues(v string) []string {
	return []string{v}[:1:1]
}

// The x-forwarded-proto values, shared by every request (see sharedValues).
var (
	protoHTTP  = sharedValues("http")
	protoHTTPS = sharedValues("https")
)

// exchange is one request's state: what the access log and the stats report.
type exchange struct {
	w     *countingWriter // &cw
	cw    countingWriter
	r     *http.Request
	start time.Time
	// routed is when the router took the request, after the HTTP filters (a fault
	// delay): x-envoy-upstream-service-time counts from here, as Envoy's router counts
	// from the downstream request's completion, which it sees after the fault filter.
	routed   time.Time
	vh       *VirtualHost
	route    *Route
	weighted *WeightedCluster
	info     accesslog.Info
	upstream cluster.UpstreamInfo // filled by the attempts when access logs are on
	rx       *countingBody
	upgrade  string // the enabled upgrade the request asks for ("websocket"), "" for none
	// corsOrigin is the allowed Origin of a CORS request, echoed in the response.
	corsOrigin string
	// remote is the client address taken from x-forwarded-for (use_remote_address
	// false); invalid: the connection's peer.
	remote netip.AddrPort
	// peer is the peer_metadata filter's state; upHost the host that answered.
	peer   peerState
	upHost cluster.Host
	// meta is the request's dynamic metadata by filter name (jwt_authn's payload).
	meta map[string]*structpb.Struct
	// alpn is istio.alpn's override for the upstream connection, nil for none.
	alpn *tlsctx.ALPN
	// abort is the downstream connection's hook that interrupts the upstream exchange
	// in place of a watch of the request's context (cluster.Abort), for abortReq, the
	// request the codec made; nil when the codec has none. It stands for the context
	// only while x.r is abortReq (the stream idle timeout replaces x.r with a request
	// whose context it ends) and no route or per-try timeout runs.
	abort    *cluster.Abort
	abortReq *http.Request
	// fs is the stream's filter state once a set_filter_state filter ran (fsSet); until
	// then the connection's (Downstream.FilterState).
	fs    map[string]internalconn.Object
	fsSet bool
	// traced is the HCM's trace decision (x-request-id's trace reason); span and
	// upSpan the request's span and the router's upstream span, nil without a
	// tracing provider (trace.go).
	traced       bool
	span, upSpan *tracing.Span
	spanNamed    bool // the upstream's x-envoy-decorator-operation named span
	// lua are the Lua filters whose request phase passed (their response phase runs
	// on the response, last first).
	lua []*lua.Config
}

// upstreamAborter is a downstream codec's response writer that gives the hook firing
// when its request is cancelled (h1Response): nil unless r is the request it made.
type upstreamAborter interface {
	upstreamAbort(r *http.Request) *cluster.Abort
}

// upstreamContext is ctx with what the exchange's upstream connections are dialed
// under: istio.alpn's override and the filter state the stream shares.
func (x *exchange) upstreamContext(ctx context.Context) context.Context {
	ctx = x.streamFilterState(ctx)
	if x.alpn != nil {
		return tlsctx.WithALPN(ctx, x.alpn)
	}
	return ctx
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt.st.rqTotal.Inc()
	rt.st.rqActive.Inc()
	defer rt.st.rqActive.Dec()
	x := &exchange{r: r, start: start}
	x.cw.ResponseWriter = w
	x.w = &x.cw // one allocation for both
	if h, ok := w.(upstreamAborter); ok {
		x.abort, x.abortReq = h.upstreamAbort(r), r
	}
	if rt.cfg.Peer != nil {
		rt.downstreamPeerState(x, r)
	}
	if r.Body != nil && r.Body != http.NoBody {
		x.rx = &countingBody{ReadCloser: r.Body}
		r.Body = x.rx
	}
	if rt.cfg.StreamIdleTimeout > 0 {
		defer rt.watchStreamIdle(x)()
	}
	code := rt.serve(x)
	if x.span != nil {
		rt.finishSpan(x, code)
	}
	rt.st.record(code)
	rt.st.rqTime.Record(uint64(time.Since(start).Milliseconds()))
	if len(rt.cfg.AccessLogs) > 0 {
		rt.logAccess(x, code)
	}
	if rt.cfg.IstioStats != nil {
		rt.recordIstioStats(x, code)
	}
}

func (rt *router) logAccess(x *exchange, code int) {
	i := &x.info
	r := x.r
	i.Start, i.Duration = x.start, time.Since(x.start)
	i.Protocol, i.Method, i.Authority, i.Scheme = r.Proto, r.Method, r.Host, "http"
	if r.ProtoMajor == 2 {
		i.Protocol = "HTTP/2" // as Envoy's %PROTOCOL%
	}
	i.Path = requestPath(r)
	i.ReqHeader, i.RespHeader = r.Header, x.w.Header()
	i.Code = code
	if x.rx != nil {
		i.BytesReceived = x.rx.n
	}
	i.BytesSent = x.w.n
	i.DownstreamLocal, i.DownstreamPeer, i.DownstreamRemote = rt.ds.Local, rt.ds.Remote, x.remote
	i.FilterChainName, i.RequestedServerName = rt.ds.FilterChainName, rt.ds.ServerName
	if a := x.upstream.LocalAddr; a != nil {
		i.UpstreamLocal = a.String()
	}
	if !i.DownstreamPeer.IsValid() {
		i.DownstreamPeer, _ = netip.ParseAddrPort(r.RemoteAddr)
	}
	if x.route != nil {
		i.RouteName = x.route.Name
	}
	accesslog.LogAll(rt.cfg.AccessLogs, i)
}

// logCodecError writes the access log entry of a request the codec could not read, as
// Envoy logs its local reply: response flag DPE, the codec's details, no request fields.
func (rt *router) logCodecError(start time.Time, code int, details string, sent int64) {
	i := &accesslog.Info{Start: start, Duration: time.Since(start), Protocol: "HTTP/1.1", Code: code,
		CodeDetails: details, Flags: accesslog.DownstreamProtocolError, BytesSent: sent,
		DownstreamLocal: rt.ds.Local, DownstreamPeer: rt.ds.Remote,
		FilterChainName: rt.ds.FilterChainName, RequestedServerName: rt.ds.ServerName}
	accesslog.LogAll(rt.cfg.AccessLogs, i)
}

func (rt *router) table() *RouteTable {
	if rt.cfg.Inline != nil {
		return rt.cfg.Inline
	}
	t, _ := rt.deps.Routes.Get(rt.cfg.RDSName)
	return t
}

func requestPath(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// serve handles one request and returns the status code sent downstream.
func (rt *router) serve(x *exchange) int {
	r := x.r
	if rt.cfg.Underscores != UnderscoresAllow {
		if code, done := rt.underscores(x); done {
			return code
		}
	}
	if rt.cfg.Path.active() {
		if code, done := rt.normalizePath(x); done {
			return code
		}
	}
	rt.mutateRequestHeaders(x)
	if rt.cfg.Tracing != nil {
		rt.startSpan(x)
	}
	rt.cfg.XFCC.apply(r.Header, r.TLS, rt.ds.LocalCert)
	connect := r.Method == http.MethodConnect
	if connect && !rt.connectAllowed(r) {
		x.info.CodeDetails = "http2.invalid.header.field"
		x.info.Flags |= accesslog.DownstreamProtocolError
		if ab, ok := unwrapAborter(x.w); ok {
			ab.Abort()
		}
		return 0
	}
	rt.selectRoute(x)
	if code, done := rt.applyFilters(x); done {
		return code
	}
	if rt.cfg.CORS && x.route != nil && x.route.CORS != nil {
		if code, done := rt.applyCORS(x); done {
			return code
		}
	}
	route := x.route
	if connect {
		if !rt.upgradeAllowed(route, UpgradeConnect) {
			x.info.CodeDetails = "upgrade_failed"
			return rt.localReply(x, http.StatusForbidden, "")
		}
		x.upgrade = UpgradeConnect
	} else if up := requestedUpgrade(r); up != "" {
		if !rt.upgradeAllowed(route, up) {
			// Envoy refuses an upgrade no upgrade_configs enables.
			x.info.CodeDetails = "upgrade_failed"
			return rt.localReply(x, http.StatusForbidden, "")
		}
		x.upgrade = up
	}
	if route == nil {
		rt.st.noRoute.Inc()
		x.info.Flags |= accesslog.NoRouteFound
		x.info.CodeDetails = "route_not_found"
		return rt.localReply(x, http.StatusNotFound, "")
	}
	switch {
	case route.Direct != nil:
		x.info.CodeDetails = "direct_response"
		return rt.localReply(x, route.Direct.Status, route.Direct.Body)
	case route.Redirect != nil:
		return rt.redirect(x)
	}
	name, wc := route.pick()
	x.weighted = wc
	x.info.UpstreamCluster = name
	cl, ok := rt.deps.Clusters.Get(name)
	if !ok {
		rt.st.noCl.Inc()
		x.info.Flags |= accesslog.NoClusterFound
		x.info.CodeDetails = "cluster_not_found"
		code := route.ClusterNotFoundCode
		if code == 0 {
			code = http.StatusServiceUnavailable
		}
		return rt.localReply(x, code, "")
	}
	if connect {
		if !route.ConnectTerminate {
			// Proxying a CONNECT upstream as a request (a route without connect_config)
			// is not implemented: the stream is reset rather than answered otherwise.
			x.info.CodeDetails = "upgrade_failed"
			if ab, ok := unwrapAborter(x.w); ok {
				ab.Abort()
			}
			return 0
		}
		return rt.connectTerminate(x, cl)
	}
	if rt.cfg.GRPCStats != nil && r.Body != nil && r.Body != http.NoBody && isGRPC(r) {
		r.Body = &grpcFrames{ReadCloser: r.Body, counter: cl.Stats().Scope().Counter("grpc.request_message_count")}
	}
	if rt.cfg.ALPN != nil {
		// Carried to the upstream requests' contexts by forward and mirror (a copy of
		// the downstream request with the override in its context cost two
		// allocations and a Request copy per request).
		x.alpn = rt.cfg.ALPN.alpnFor(cl, r.ProtoMajor, r.ProtoMinor)
	}
	if rt.cfg.Tracing != nil {
		rt.decorateRequest(x, cl) // trace.go
	}
	return rt.forward(x, cl)
}

// selectRoute selects the request's virtual host and route from its headers and the
// dynamic metadata the filters have written so far: before the filters run, and again
// when one clears the route cache (Envoy's clearRouteCache, after which the router
// selects the route anew).
func (rt *router) selectRoute(x *exchange) {
	t := rt.table()
	if t == nil {
		return
	}
	r := x.r
	path := requestPath(r)
	if r.Method == http.MethodConnect {
		path = "" // a CONNECT has no :path
	}
	x.vh, x.route = t.MatchRequest(&Request{Method: r.Method, Authority: r.Host, Path: path, Scheme: "http", Header: r.Header, Metadata: x.meta})
}

// applyFilters runs the HTTP filters in order: RBAC filters deny with 403, fault filters
// delay and abort (the route's typed_per_filter_config replaces a fault filter's own
// config). It reports whether the request was answered.
func (rt *router) applyFilters(x *exchange) (int, bool) {
	for _, f := range rt.cfg.Filters {
		if f.SetState != nil {
			rt.applySetState(x, f.SetState)
			continue
		}
		if f.JWT != nil {
			if code, done := rt.applyJWT(x, f.JWT); done {
				return code, true
			}
			continue
		}
		if f.RBAC != nil {
			if code, done := rt.applyRBAC(x, f.RBAC); done {
				return code, true
			}
			continue
		}
		if f.Lua != nil {
			if code, done := rt.applyLua(x, f.Lua); done {
				return code, true
			}
			continue
		}
		cfg := f.Fault
		if x.route != nil {
			if o, ok := x.route.Faults[f.Name]; ok {
				cfg = o
			}
		}
		d := cfg.Decide()
		if d.Delay == 0 && d.AbortStatus == 0 {
			continue
		}
		st := rt.st.faults()
		st.ActiveFaults.Inc()
		if d.Delay > 0 {
			st.DelaysInjected.Inc()
			x.info.Flags |= accesslog.DelayInjected
			t := time.NewTimer(d.Delay)
			select {
			case <-t.C:
			case <-x.r.Context().Done():
				t.Stop()
				st.ActiveFaults.Dec()
				if rt.cfg.StreamIdleTimeout > 0 && idleTimedOut(x) {
					return rt.streamIdleReply(x), true
				}
				x.info.Flags |= accesslog.DownstreamConnectionTermination
				return 0, true
			}
		}
		st.ActiveFaults.Dec()
		if d.AbortStatus != 0 {
			st.AbortsInjected.Inc()
			x.info.Flags |= accesslog.FaultInjected
			x.info.CodeDetails = "fault_filter_abort"
			return rt.localReply(x, d.AbortStatus, fault.AbortBody), true
		}
	}
	return 0, false
}

func (rt *router) redirect(x *exchange) int {
	rd, r := x.route.Redirect, x.r
	scheme := "http"
	if rd.Scheme != "" {
		scheme = rd.Scheme
	}
	host, port := r.Host, ""
	if h, p, ok := strings.Cut(r.Host, ":"); ok {
		host, port = h, p
	}
	if rd.Host != "" {
		// host_redirect replaces the whole authority, port included.
		host, port = rd.Host, ""
		if h, p, ok := strings.Cut(rd.Host, ":"); ok {
			host, port = h, p
		}
	}
	switch {
	case rd.Port != 0:
		port = strconv.Itoa(int(rd.Port))
	case rd.Scheme == "https" && port == "80", rd.Scheme == "http" && port == "443":
		port = ""
	}
	path := requestPath(r)
	switch {
	case rd.Path != "":
		if !rd.StripQuery && strings.Contains(path, "?") && !strings.Contains(rd.Path, "?") {
			path = rd.Path + path[strings.IndexByte(path, '?'):]
		} else {
			path = rd.Path
		}
	case rd.Prefix != "":
		path, _ = x.route.applyPath(path)
	}
	if rd.StripQuery {
		path = stripQuery(path)
	}
	loc := scheme + "://" + host
	if port != "" {
		loc += ":" + port
	}
	x.w.Header().Set("Location", loc+path)
	x.info.CodeDetails = "via_route"
	code := rd.Code
	if code == 0 {
		code = http.StatusMovedPermanently
	}
	return rt.localReply(x, code, "")
}

// outgoing builds the upstream request: hop-by-hop headers removed, header mutations
// (weighted cluster, route, virtual host), path and authority rewrites, Envoy's headers.
// ctx is the upstream requests' context, so a first attempt without a per-try timeout
// needs no copy of out (see try).
func (rt *router) outgoing(ctx context.Context, x *exchange, timeout time.Duration) *http.Request {
	r, route := x.r, x.route
	// Request.Clone without its copies: the outgoing request shares the downstream
	// request's header map and mutates it in place, as Envoy's router finalizes the one
	// request header map the connection manager holds. So the access log's %REQ(...)%,
	// the tracer and a retry see the headers as sent upstream (the route's
	// request_headers_to_add, x-envoy-expected-rq-timeout-ms, x-envoy-attempt-count,
	// the peer metadata), as in Envoy; a mirror takes its own copy. The URL is replaced
	// below; the proxy parses no forms, so Form, PostForm and MultipartForm are nil.
	out := r.WithContext(ctx)
	if r.Trailer != nil {
		out.Trailer = r.Trailer.Clone()
	}
	out.TransferEncoding = slices.Clone(r.TransferEncoding)
	out.RequestURI = ""
	out.Close = false
	// What the hop-by-hop fields say is read before they are removed.
	te := teTrailers(r.Header)
	conn := r.Header.Get("Connection")
	var upgrade string
	if x.upgrade != "" {
		upgrade = r.Header.Get("Upgrade")
	}
	delHopByHop(out.Header)
	if te {
		out.Header["Te"] = teTrailersValue // the one TE value Envoy forwards (gRPC needs it)
	}
	if conn != "" {
		for h := range strings.SplitSeq(conn, ",") {
			if h = strings.TrimSpace(h); h != "" {
				out.Header.Del(h)
			}
		}
	}
	host := r.Host
	if x.weighted != nil {
		x.weighted.Headers.req.apply(out.Header, &host)
	}
	route.Headers.req.apply(out.Header, &host)
	x.vh.Headers.req.apply(out.Header, &host)
	path := requestPath(r)
	if np, changed := route.applyPath(path); changed {
		out.Header.Set("X-Envoy-Original-Path", path)
		path = np
	}
	switch {
	case x.weighted != nil && x.weighted.HostRewrite != "":
		host = x.weighted.HostRewrite
	case route.Rewrite.host != "":
		host = route.Rewrite.host
	}
	out.Host = host
	u := *r.URL
	u.Path, u.RawPath, u.RawQuery = "", "", ""
	u.Opaque = path // sent verbatim as the request target
	if p, q, ok := strings.Cut(path, "?"); ok {
		u.Opaque, u.RawQuery = p, q
	}
	out.URL = &u
	if timeout > 0 {
		out.Header.Set("X-Envoy-Expected-Rq-Timeout-Ms", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	if x.upgrade != "" {
		upgradeHeaders(out, upgrade)
	}
	return out
}

// teTrailersValue is the TE field sent upstream, shared by every request (see sharedValues).
var teTrailersValue = sharedValues("trailers")

func (rt *router) setServer(h http.Header) {
	vs := rt.cfg.serverValues
	if vs == nil || vs[0] != rt.cfg.ServerName { // a Config not made by Compile
		vs = []string{rt.cfg.ServerName}
	}
	switch rt.cfg.ServerHeader {
	case ServerHeaderOverwrite:
		h["Server"] = vs
	case ServerHeaderAppendIfAbsent:
		if h.Get("Server") == "" {
			h["Server"] = vs
		}
	}
}

// localReply sends a response Envoy generates itself (text/plain when it has a body).
func (rt *router) localReply(x *exchange, code int, body string) int {
	h := x.w.Header()
	if body != "" {
		h.Set("Content-Type", "text/plain")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if rt.cfg.Peer != nil {
		rt.cfg.Peer.OnResponse(h, &x.peer, netip.Addr{})
	}
	code = rt.luaResponse(x, code, h)
	rt.setServer(h)
	x.w.WriteHeader(code)
	_, _ = io.WriteString(x.w, body)
	return code
}

// copyBufs are copyFlushing's buffers, reused across requests.
var copyBufs = sync.Pool{New: func() any { return new([32 * 1024]byte) }}

func copyFlushing(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	bp := copyBufs.Get().(*[32 * 1024]byte)
	defer copyBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			if err != io.EOF {
				if a, ok := unwrapAborter(w); ok {
					a.Abort() // the upstream reset mid-body: reset downstream too, as Envoy does
				}
			}
			return
		}
	}
}

// aborter is a response writer that can end its response unfinished.
type aborter interface{ Abort() }

func unwrapAborter(w http.ResponseWriter) (aborter, bool) {
	for {
		if a, ok := w.(aborter); ok {
			return a, true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil, false
		}
		w = u.Unwrap()
	}
}

// countingWriter counts the body bytes sent downstream.
type countingWriter struct {
	http.ResponseWriter
	n     int64
	stamp *streamIdle // set under a stream idle timeout
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.stamp != nil {
		w.stamp.touch()
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingBody counts the body bytes received from downstream.
type countingBody struct {
	io.ReadCloser
	n     int64
	stamp *streamIdle // set under a stream idle timeout
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if b.stamp != nil && n > 0 {
		b.stamp.touch()
	}
	return n, err
}

// newUUID returns a random (version 4) UUID as Envoy generates for x-request-id.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// teTrailers reports whether the request's TE header lists "trailers".
func teTrailers(h http.Header) bool {
	for _, v := range h.Values("Te") {
		for _, t := range strings.Split(v, ",") {
			if t, _, _ = strings.Cut(strings.TrimSpace(t), ";"); strings.EqualFold(t, "trailers") {
				return true
			}
		}
	}
	return false
}

// normalizePath applies the HCM's path normalization to the request target before
// routing; it reports whether the request was answered (400 or a redirect).
func (rt *router) normalizePath(x *exchange) (int, bool) {
	r := x.r
	target := requestPath(r)
	p, res := rt.cfg.Path.apply(target)
	switch res {
	case pathReject:
		x.info.CodeDetails = "path_normalization_failed"
		return rt.localReply(x, http.StatusBadRequest, ""), true
	case pathRedirect:
		x.w.Header().Set("Location", p)
		x.info.CodeDetails = "path_normalization_redirect"
		return rt.localReply(x, http.StatusTemporaryRedirect, ""), true
	}
	if p != target {
		var err error
		r.RequestURI = p
		path, q, _ := strings.Cut(p, "?")
		u := *r.URL
		u.RawPath, u.RawQuery = path, q
		if u.Path, err = url.PathUnescape(path); err != nil {
			u.Path = path
		}
		r.URL = &u
	}
	return 0, false
}

// underscores applies headers_with_underscores_action: a header name with "_" rejects
// the request (400, as Envoy's codec) or is dropped, counted under Envoy's stat names.
func (rt *router) underscores(x *exchange) (int, bool) {
	for k := range x.r.Header {
		if !strings.Contains(k, "_") {
			continue
		}
		if rt.cfg.Underscores == UnderscoresReject {
			rt.st.scope.Counter("requests_rejected_with_underscores_in_headers").Inc()
			x.info.CodeDetails = "http1.unexpected_underscore"
			return rt.localReply(x, http.StatusBadRequest, ""), true
		}
		x.r.Header.Del(k)
		rt.st.scope.Counter("dropped_headers_with_underscores").Inc()
	}
	return 0, false
}
