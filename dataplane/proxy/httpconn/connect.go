package httpconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/setstate"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// UpgradeConnect is the upgrade type (lower case) of CONNECT in upgrade_configs.
const UpgradeConnect = "connect"

// applySetState runs one set_filter_state HTTP filter on the request: its objects join
// the stream's filter state (x.fs, which starts as the connection's), and those shared
// with upstream go with the upstream connections the stream makes (upstreamContext).
func (rt *router) applySetState(x *exchange, c *setstate.Config) {
	r := x.r
	info := &accesslog.Info{Start: x.start, Method: r.Method, Path: requestPath(r), Authority: r.Host, Scheme: "http",
		ReqHeader: r.Header, DownstreamLocal: rt.ds.Local, DownstreamPeer: rt.ds.Remote, DownstreamRemote: x.remote,
		FilterChainName: rt.ds.FilterChainName, RequestedServerName: rt.ds.ServerName,
		PeerURISAN: rt.ds.PeerSAN, LocalURISAN: rt.ds.LocalSAN}
	if r.Method == http.MethodConnect {
		info.Path = ""
	}
	if !info.DownstreamPeer.IsValid() {
		info.DownstreamPeer, _ = netip.ParseAddrPort(r.RemoteAddr)
	}
	x.fs, x.fsSet = c.Apply(x.filterState(rt.ds.FilterState), info), true
}

// connectAllowed reports whether a CONNECT request may go on: an HTTP/2 CONNECT needs
// http2_protocol_options.allow_connect, else the codec resets the stream as Envoy's does.
func (rt *router) connectAllowed(r *http.Request) bool {
	return r.ProtoMajor != 2 || rt.cfg.AllowConnect
}

// connectTerminate answers a CONNECT routed to a route whose CONNECT upgrade has
// connect_config, as Envoy's router does: it connects to a host of cl over TCP (an
// internal listener for istiod's connect_terminate, with the stream's shared filter
// state), answers 200 once connected (503 on a connect failure, flag UF), then carries
// the stream's bytes both ways, passing on each side's end, until both have ended.
func (rt *router) connectTerminate(x *exchange, cl *cluster.Cluster) int {
	ctx := x.upstreamContext(x.r.Context())
	host, err := cl.Pick(rt.ds.Local)
	if err != nil {
		return rt.fail(x, cl, attempt{kind: failNoHost, err: err})
	}
	x.info.UpstreamHost = host.String()
	release, err := cl.Admit(ctx)
	if err != nil {
		return rt.fail(x, cl, attempt{kind: failOverflow, host: host, err: err})
	}
	defer release()
	if x.r.ProtoMajor == 2 {
		// An HTTP/2 stream to an internal listener (istiod's connect_terminate to
		// main_internal): the listener serves the stream itself, on this goroutine.
		sc := newStreamConn(x)
		if serve, ok, err := cl.HandInternal(ctx, host, sc); ok {
			if err != nil {
				_ = sc.Close()
				cl.ReportResult(host, http.StatusServiceUnavailable)
				return rt.fail(x, cl, attempt{kind: failConnect, host: host, err: err})
			}
			x.upstream.LocalAddr = internalconn.Addr{Listener: host.Internal.Listener, EndpointID: "client"}
			if rt.connectEstablished(x, cl, host) {
				serve()
			}
			sc.finish()
			return http.StatusOK
		}
		// Not an internal listener the stream can be handed to: sc was never read.
	}
	// The tunnel outlives the request's own context only as long as the stream does.
	up, err := cl.Dial(ctx, host)
	if err != nil {
		cl.ReportResult(host, http.StatusServiceUnavailable)
		return rt.fail(x, cl, attempt{kind: failConnect, host: host, err: err})
	}
	defer up.Close()
	x.upstream.LocalAddr = up.LocalAddr()
	if hj, ok := unwrapHijacker(x.w); ok && x.r.ProtoMajor == 1 {
		rt.connected(x, cl, host)
		return rt.connectTerminateHTTP1(x, hj, up)
	}
	if !rt.connectEstablished(x, cl, host) {
		return http.StatusOK
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if x.r.Body != nil {
			_, _ = io.Copy(up, x.r.Body)
		}
		closeWrite(up)
	}()
	copyFlushing(x.w, up)
	// The upstream ended its side: the stream's end follows when the handler returns.
	// Wait for the client's side within the half-close grace, as tunnel does.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(upgradeHalfCloseGrace):
	}
	_ = up.Close()
	wg.Wait()
	return http.StatusOK
}

// connected records the CONNECT's upstream connection to host as established and puts
// the response headers of the 200 in place.
func (rt *router) connected(x *exchange, cl *cluster.Cluster, host cluster.Host) {
	cl.ReportResult(host, http.StatusOK)
	cl.Stats().RecordResponse(http.StatusOK)
	h := x.w.Header()
	rt.setServer(h)
	if rt.cfg.Peer != nil {
		rt.cfg.Peer.OnResponse(h, &x.peer, discoveryAddr(host))
	}
	x.info.CodeDetails = "via_upstream"
}

// connectEstablished answers an HTTP/2 CONNECT with the 200 once its upstream connection
// is up; it reports whether the 200 went out (the stream can carry the tunnel).
func (rt *router) connectEstablished(x *exchange, cl *cluster.Cluster, host cluster.Host) bool {
	rt.connected(x, cl, host)
	x.w.WriteHeader(http.StatusOK)
	return http.NewResponseController(x.w).Flush() == nil
}

// streamConn is a terminated HTTP/2 CONNECT stream as the connection an internal
// listener serves: reads are the request body's (read ahead, so that the listener's read
// deadlines work as on a socket), writes go out as the response's DATA, each flushed.
// The stream's bytes count in the exchange's stats through x.w and x.r.Body.
type streamConn struct {
	ra     *internalconn.ReadAhead
	w      http.ResponseWriter
	rc     *http.ResponseController
	wmu    sync.Mutex  // one write at a time on the response
	closed atomic.Bool // CloseWrite or Close: writes fail
}

func newStreamConn(x *exchange) *streamConn {
	body := x.r.Body
	if body == nil {
		body = http.NoBody
	}
	return &streamConn{ra: internalconn.NewReadAhead(body), w: x.w, rc: http.NewResponseController(x.w)}
}

func (c *streamConn) Read(b []byte) (int, error) { return c.ra.Read(b) }

func (c *streamConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	n, err := c.w.Write(b)
	if err == nil {
		err = c.rc.Flush()
	}
	return n, err
}

// CloseWrite ends what the listener sends: the stream's end follows when the listener is
// done with the connection (the CONNECT's handler returns).
func (c *streamConn) CloseWrite() error {
	c.closed.Store(true)
	return nil
}

// Close ends both ways; the request body is closed and what was read ahead dropped.
func (c *streamConn) Close() error {
	c.closed.Store(true)
	return c.ra.Close()
}

// finish closes c once its handler is about to return: a write under way ends first,
// and none starts after (the response is the handler's only until it returns).
func (c *streamConn) finish() {
	_ = c.Close()
	c.wmu.Lock()
	defer c.wmu.Unlock()
}

func (c *streamConn) LocalAddr() net.Addr  { return internalconn.Addr{} }
func (c *streamConn) RemoteAddr() net.Addr { return internalconn.Addr{} }

func (c *streamConn) SetDeadline(t time.Time) error {
	_ = c.ra.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *streamConn) SetReadDeadline(t time.Time) error { return c.ra.SetReadDeadline(t) }

// SetWriteDeadline is the stream's: a write that misses it resets the stream.
func (c *streamConn) SetWriteDeadline(t time.Time) error { return c.rc.SetWriteDeadline(t) }

// connectTerminateHTTP1 is connectTerminate's end on an HTTP/1.1 connection: the 200
// goes out on the connection, which then carries the tunnel.
func (rt *router) connectTerminateHTTP1(x *exchange, hj hijacker, up net.Conn) int {
	conn, brw, err := hj.Hijack()
	if err != nil {
		x.info.CodeDetails = "upgrade_failed"
		return http.StatusOK
	}
	h := x.w.Header()
	if _, ok := h["Date"]; !ok {
		h["Date"] = []string{httpDate()}
	}
	_, _ = brw.WriteString("HTTP/1.1 200 OK\r\n")
	writeHeader(brw.Writer, h)
	_, _ = brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		_ = conn.Close()
		return http.StatusOK
	}
	x.bridge(conn, brw.Reader, up)
	return http.StatusOK
}

// streamFilterState is the filter state an upstream connection of x carries: the
// stream's when a set_filter_state filter ran on it, else none beyond the connection's
// (already in the request's context).
func (x *exchange) streamFilterState(ctx context.Context) context.Context {
	if !x.fsSet {
		return ctx
	}
	return internalconn.WithFilterState(ctx, x.fs)
}

// checkConnectRoutes refuses an HCM whose upgrade_configs enable CONNECT for routes the
// proxy cannot serve: routes from RDS (not known when the HCM compiles) or a
// connect_matcher route without a CONNECT upgrade of its own with connect_config
// (Envoy would send that CONNECT upstream as a request, which is not implemented).
func (cfg *Config) checkConnectRoutes() error {
	if !cfg.Upgrades[UpgradeConnect] {
		return nil
	}
	if cfg.Inline == nil {
		return errors.New("upgrade_configs: CONNECT is supported by meshlab proxy only with an inline route_config whose CONNECT routes terminate it (connect_config)")
	}
	for _, vh := range cfg.Inline.vhostOrder {
		for _, r := range vh.Routes {
			if r.kind == matchConnect && !r.ConnectTerminate {
				return fmt.Errorf("route_config: virtual host %s route %q: a CONNECT route needs an upgrade_configs CONNECT with connect_config in meshlab proxy (proxying CONNECT upstream is not implemented)", vh.Name, r.Name)
			}
		}
	}
	return nil
}

// filterState is the stream's filter state: the objects set on it, else the
// connection's (conn).
func (x *exchange) filterState(conn map[string]internalconn.Object) map[string]internalconn.Object {
	if x.fsSet {
		return x.fs
	}
	return conn
}
