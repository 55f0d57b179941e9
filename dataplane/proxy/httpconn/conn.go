package httpconn

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// h2Preface starts every HTTP/2 connection with prior knowledge (h2c).
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// ServeConn serves conn until the client closes it or ctx ends, and blocks until then.
// As Envoy's codec_type AUTO it speaks HTTP/2 when TLS negotiated "h2" or a plaintext
// connection starts with the HTTP/2 preface, HTTP/1.1 otherwise. It counts
// http.<stat_prefix>.downstream_cx_total/active and downstream_cx_http1_total or
// downstream_cx_http2_total.
func ServeConn(ctx context.Context, cfg *Config, deps Deps, conn net.Conn, ds Downstream) {
	st := newHCMStats(deps.Stats, cfg.StatPrefix)
	st.cxTotal.Inc()
	st.cxActive.Inc()
	defer st.cxActive.Dec()

	h2, conn := detectHTTP2(ctx, cfg.Codec, conn)
	handler := &router{cfg: cfg, deps: deps, ds: ds, st: st}
	if h2 {
		st.scope.Counter("downstream_cx_http2_total").Inc()
		serveHTTP2(ctx, cfg, deps, conn, handler, st)
		return
	}
	st.scope.Counter("downstream_cx_http1_total").Inc()
	serveHTTP1(ctx, deps, conn, handler, st)
}

// detectHTTP2 decides the codec of a connection: by ALPN over TLS, by the preface on a
// plaintext one (the returned connection still yields every byte read).
func detectHTTP2(ctx context.Context, codec Codec, conn net.Conn) (bool, net.Conn) {
	switch codec {
	case CodecHTTP1:
		return false, conn
	case CodecHTTP2:
		return true, conn
	}
	if cs, ok := conn.(connectionStater); ok {
		return cs.ConnectionState().NegotiatedProtocol == "h2", conn
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	buf := make([]byte, 0, len(h2Preface))
	for len(buf) < len(h2Preface) {
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if !bytes.HasPrefix(h2Preface, buf) || err != nil {
			return false, tlsctx.NewPrefixConn(conn, buf)
		}
	}
	return true, tlsctx.NewPrefixConn(conn, buf)
}

// serveHTTP1 serves HTTP/1.1 on conn; on drain the next response carries
// "connection: close" and an idle connection is closed.
func serveHTTP1(ctx context.Context, deps Deps, conn net.Conn, handler http.Handler, st *hcmStats) {
	l := newOneConnListener(conn)
	var drainOnce sync.Once
	var srv *http.Server
	drain := func() {
		drainOnce.Do(func() {
			// Connection: close on the next response, and close the connection now if
			// it is idle. A connection that has not sent its first request yet is left
			// open (Go's server counts it as busy): its client may be writing that
			// request right now and would not retry on a connection it never used. It
			// serves one request under the drained configuration, as in Envoy.
			srv.SetKeepAlivesEnabled(false)
			st.scope.Counter("downstream_cx_drain_close").Inc()
		})
	}
	if deps.DrainClose != nil {
		next := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if deps.DrainClose() {
				drain()
			}
			next.ServeHTTP(w, r)
		})
	}
	srv = &http.Server{
		Handler:  handler,
		ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.finish()
			}
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if deps.Draining != nil {
		go func() {
			select {
			case <-deps.Draining:
				drain()
			case <-l.done:
			}
		}()
	}
	_ = srv.Serve(l)
	<-l.done
}

// oneConnListener hands one connection to an http.Server, then blocks Accept until that
// connection is finished so Serve returns only when the connection is done.
type oneConnListener struct {
	conn net.Conn
	mu   sync.Mutex
	used bool
	once sync.Once
	done chan struct{}
}

func newOneConnListener(c net.Conn) *oneConnListener {
	return &oneConnListener{conn: c, done: make(chan struct{})}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return l.conn, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) finish() { l.once.Do(func() { close(l.done) }) }

func (l *oneConnListener) Close() error {
	l.finish()
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
