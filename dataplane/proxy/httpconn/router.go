package httpconn

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Envoy's local reply bodies.
const (
	BodyNoHealthyUpstream = "no healthy upstream"
	BodyConnectFailure    = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
	BodyConnectReset      = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
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
}

// Downstream describes the downstream connection a request arrived on.
type Downstream struct {
	Local  netip.AddrPort // the (possibly restored original) destination
	Remote netip.AddrPort
}

// router serves the requests of one downstream connection.
type router struct {
	cfg  *Config
	deps Deps
	ds   Downstream
	st   *hcmStats
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
}

func newHCMStats(store *stats.Store, prefix string) *hcmStats {
	sc := store.HTTP(prefix)
	return &hcmStats{
		scope:    sc,
		rqTotal:  sc.Counter("downstream_rq_total"),
		rqActive: sc.Gauge("downstream_rq_active"),
		rqDone:   sc.Counter("downstream_rq_completed"),
		cxTotal:  sc.Counter("downstream_cx_total"),
		cxActive: sc.Gauge("downstream_cx_active"),
		noRoute:  sc.Counter("no_route"),
		noCl:     sc.Counter("no_cluster"),
	}
}

func (s *hcmStats) record(code int) {
	s.scope.Counter("downstream_rq_" + stats.CodeClass(code)).Inc()
	s.rqDone.Inc()
}

// hopByHop are the headers Envoy never forwards.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer"}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt.st.rqTotal.Inc()
	rt.st.rqActive.Inc()
	defer rt.st.rqActive.Dec()
	code := rt.serve(w, r, start)
	rt.st.record(code)
}

func (rt *router) table() *RouteTable {
	if rt.cfg.Inline != nil {
		return rt.cfg.Inline
	}
	t, _ := rt.deps.Routes.Get(rt.cfg.RDSName)
	return t
}

// serve handles one request and returns the status code sent downstream.
func (rt *router) serve(w http.ResponseWriter, r *http.Request, start time.Time) int {
	if r.Header.Get("X-Request-Id") == "" {
		r.Header.Set("X-Request-Id", newUUID())
	}
	if r.Header.Get("X-Forwarded-Proto") == "" {
		r.Header.Set("X-Forwarded-Proto", "http")
	}
	path := r.RequestURI
	if !strings.HasPrefix(path, "/") {
		path = r.URL.RequestURI()
	}
	var route *Route
	if t := rt.table(); t != nil {
		_, route = t.Match(r.Host, path)
	}
	if route == nil {
		rt.st.noRoute.Inc()
		return rt.localReply(w, http.StatusNotFound, "")
	}
	if route.Direct != nil {
		return rt.localReply(w, route.Direct.Status, route.Direct.Body)
	}
	name := route.PickCluster()
	cl, ok := rt.deps.Clusters.Get(name)
	if !ok {
		rt.st.noCl.Inc()
		return rt.localReply(w, http.StatusServiceUnavailable, "")
	}
	host, err := cl.Pick(rt.ds.Local)
	if err != nil {
		return rt.localReply(w, http.StatusServiceUnavailable, BodyNoHealthyUpstream)
	}
	return rt.forward(w, r, route, cl, host, start)
}

func (rt *router) forward(w http.ResponseWriter, r *http.Request, route *Route, cl *cluster.Cluster, host cluster.Host, start time.Time) int {
	ctx := r.Context()
	if route.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, route.Timeout)
		defer cancel()
	}
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.Close = false
	u := *r.URL
	out.URL = &u
	out.Host = r.Host
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	for _, h := range strings.Split(r.Header.Get("Connection"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			out.Header.Del(h)
		}
	}
	if route.Timeout > 0 {
		out.Header.Set("X-Envoy-Expected-Rq-Timeout-Ms", strconv.FormatInt(route.Timeout.Milliseconds(), 10))
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := cl.RoundTrip(out, host)
	if err != nil {
		return rt.upstreamFailure(w, ctx, cl, err)
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
	h.Set("X-Envoy-Upstream-Service-Time", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	rt.setServer(h)
	cl.Stats().RecordResponse(resp.StatusCode)
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
	return resp.StatusCode
}

func (rt *router) upstreamFailure(w http.ResponseWriter, ctx context.Context, cl *cluster.Cluster, err error) int {
	var opErr *net.OpError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		cl.Stats().UpstreamRqTimeout.Inc()
		cl.Stats().RecordResponse(http.StatusGatewayTimeout)
		return rt.localReply(w, http.StatusGatewayTimeout, BodyTimeout)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		cl.Stats().RecordResponse(http.StatusServiceUnavailable)
		return rt.localReply(w, http.StatusServiceUnavailable, BodyConnectFailure)
	}
	rt.deps.Logger.Debug("upstream request failed", "cluster", cl.Name(), "err", err)
	cl.Stats().RecordResponse(http.StatusServiceUnavailable)
	return rt.localReply(w, http.StatusServiceUnavailable, BodyConnectReset)
}

func (rt *router) setServer(h http.Header) {
	switch rt.cfg.ServerHeader {
	case ServerHeaderOverwrite:
		h.Set("Server", rt.cfg.ServerName)
	case ServerHeaderAppendIfAbsent:
		if h.Get("Server") == "" {
			h.Set("Server", rt.cfg.ServerName)
		}
	}
}

// localReply sends a response Envoy generates itself (text/plain when it has a body).
func (rt *router) localReply(w http.ResponseWriter, code int, body string) int {
	h := w.Header()
	if body != "" {
		h.Set("Content-Type", "text/plain")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rt.setServer(h)
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
	return code
}

func copyFlushing(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32*1024)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// newUUID returns a random (version 4) UUID as Envoy generates for x-request-id.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
