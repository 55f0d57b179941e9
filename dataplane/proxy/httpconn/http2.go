package httpconn

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// DefaultDrainTimeout is the HCM's drain_timeout when unset: the time between the first
// GOAWAY of a drain and the final one.
const DefaultDrainTimeout = 5 * time.Second

// DefaultMaxConcurrentStreams is Envoy's http2_protocol_options.max_concurrent_streams.
const DefaultMaxConcurrentStreams = 2147483647

// serveHTTP2 serves HTTP/2 on conn, each stream through handler. On drain it follows
// Envoy's sequence: a GOAWAY with last stream id 2^31-1 at once, then after the drain
// timeout the final GOAWAY with the last stream id the server processed; the connection
// closes when the streams in flight are done.
func serveHTTP2(ctx context.Context, cfg *Config, deps Deps, conn net.Conn, handler http.Handler, st *hcmStats) {
	fc := &frameConn{Conn: conn}
	var wire net.Conn = fc
	if cs, ok := conn.(connectionStater); ok {
		wire = tlsFrameConn{frameConn: fc, cs: cs}
		// The HTTP/2 server gives a request the TLS state only when its :scheme is
		// https; Envoy's XFCC and x-forwarded-proto follow the connection instead.
		state := cs.ConnectionState()
		next := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil {
				r.TLS = &state
			}
			next.ServeHTTP(w, r)
		})
	}
	streams := cfg.MaxConcurrentStreams
	if streams == 0 {
		streams = DefaultMaxConcurrentStreams
	}
	base := &http.Server{Handler: handler, ErrorLog: log.New(io.Discard, "", 0)}
	// x/net/http2 rather than net/http: the proxy serves one already-accepted connection
	// whose frames it watches and answers (GOAWAY on drain), which needs ServeConn; net/http
	// has no per-connection equivalent.
	// connection_keepalive: a PING once the connection received nothing for the
	// interval, the connection closed when the ack does not come within the timeout.
	h2s := &http2.Server{MaxConcurrentStreams: streams, IdleTimeout: cfg.IdleTimeout, //nolint:staticcheck // SA1019: see above
		ReadIdleTimeout: cfg.KeepaliveInterval, PingTimeout: cfg.KeepaliveTimeout} //nolint:staticcheck // SA1019: see above
	if err := http2.ConfigureServer(base, h2s); err != nil { //nolint:staticcheck // SA1019: see above
		deps.Logger.Debug("configure http2 server", "err", err)
		_ = conn.Close()
		return
	}
	done := make(chan struct{})
	defer close(done)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	decided := make(chan struct{}) // closed when DrainClose decided this connection drains
	if deps.DrainClose != nil {
		var once sync.Once
		next := base.Handler
		base.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if deps.DrainClose() {
				once.Do(func() { close(decided) })
			}
			next.ServeHTTP(w, r)
		})
		handler = base.Handler
	}
	if deps.Draining != nil || deps.DrainClose != nil {
		go func() {
			select {
			case <-deps.Draining:
			case <-decided:
			case <-done:
				return
			}
			st.scope.Counter("downstream_cx_drain_close").Inc()
			if err := fc.GoAway(maxStreamID); err != nil {
				return
			}
			wait := cfg.DrainTimeout
			if wait == 0 {
				wait = DefaultDrainTimeout
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
				// Shutdown starts every connection's graceful shutdown (the final GOAWAY);
				// the base server has no listener, so it returns at once.
				sctx, cancel := context.WithCancel(context.Background())
				cancel()
				_ = base.Shutdown(sctx)
			case <-done:
			}
		}()
	}
	h2s.ServeConn(wire, &http2.ServeConnOpts{Context: ctx, BaseConfig: base, Handler: handler}) //nolint:staticcheck // SA1019: see ConfigureServer above
}
