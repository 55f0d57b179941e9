package httpconn

import (
	"bytes"
	"context"
	"net"

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
	serveHTTP1(ctx, deps, conn, handler, st, cfg.IdleTimeout)
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
