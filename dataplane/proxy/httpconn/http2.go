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

	"github.com/meshlab/meshlab/dataplane/h2connect"
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
	if cfg.connectOnly() {
		serveConnectHTTP2(ctx, cfg, deps, conn, handler, st)
		return
	}
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
	var decided <-chan struct{}
	base.Handler, decided = drainDecision(deps, base.Handler)
	handler = base.Handler
	watchDrain(cfg, deps, st, done, decided, func() error { return fc.GoAway(maxStreamID) }, func() {
		// Shutdown starts every connection's graceful shutdown (the final GOAWAY); the
		// base server has no listener, so it returns at once.
		sctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = base.Shutdown(sctx)
	})
	h2s.ServeConn(wire, &http2.ServeConnOpts{Context: ctx, BaseConfig: base, Handler: handler}) //nolint:staticcheck // SA1019: see ConfigureServer above
}

// connectOnly reports whether the HCM serves nothing but CONNECT over HTTP/2: CONNECT
// upgraded and allowed, and every route of its inline route table a connect_matcher
// (istiod's connect_terminate). Such a connection is served by dataplane/h2connect.
func (cfg *Config) connectOnly() bool {
	if !cfg.Upgrades[UpgradeConnect] || !cfg.AllowConnect || cfg.Inline == nil {
		return false
	}
	n := 0
	for _, vh := range cfg.Inline.vhostOrder {
		for _, r := range vh.Routes {
			if r.kind != matchConnect {
				return false
			}
			n++
		}
	}
	return n > 0
}

// serveConnectHTTP2 is serveHTTP2 for a connect-only HCM: the proxy's own CONNECT server
// (dataplane/h2connect) writes each stream's frames from the stream's goroutine, where
// x/net's server hops through its serve loop and flushes from a goroutine per flush.
// Everything else is as serveHTTP2: the router per stream (routes, filters, access log,
// stats, filter state), the TLS state, limits, keepalive, idle timeout and the drain.
func serveConnectHTTP2(ctx context.Context, cfg *Config, deps Deps, conn net.Conn, handler http.Handler, st *hcmStats) {
	streams := cfg.MaxConcurrentStreams
	if streams == 0 {
		streams = DefaultMaxConcurrentStreams
	}
	handler, decided := drainDecision(deps, handler)
	srv := &h2connect.Server{Handler: handler, MaxConcurrentStreams: streams, IdleTimeout: cfg.IdleTimeout,
		ReadIdleTimeout: cfg.KeepaliveInterval, PingTimeout: cfg.KeepaliveTimeout}
	hc := srv.NewConn(ctx, conn)
	done := make(chan struct{})
	defer close(done)
	watchDrain(cfg, deps, st, done, decided, func() error { return hc.GoAway(maxStreamID) }, hc.Shutdown)
	hc.Serve()
}

// drainDecision wraps handler so that a request for which deps.DrainClose decides the
// connection drains closes the returned channel (watchDrain starts the drain then).
func drainDecision(deps Deps, handler http.Handler) (http.Handler, <-chan struct{}) {
	decided := make(chan struct{})
	if deps.DrainClose == nil {
		return handler, decided
	}
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if deps.DrainClose() {
			once.Do(func() { close(decided) })
		}
		handler.ServeHTTP(w, r)
	}), decided
}

// watchDrain runs Envoy's drain sequence on an HTTP/2 connection when the listener drains
// or decided closes, until done: first (a GOAWAY with last stream id 2^31-1) at once,
// final (the GOAWAY with the last stream processed, the connection closed when its streams
// are done) after the drain timeout.
func watchDrain(cfg *Config, deps Deps, st *hcmStats, done, decided <-chan struct{}, first func() error, final func()) {
	if deps.Draining == nil && deps.DrainClose == nil {
		return
	}
	go func() {
		select {
		case <-deps.Draining:
		case <-decided:
		case <-done:
			return
		}
		st.scope.Counter("downstream_cx_drain_close").Inc()
		if err := first(); err != nil {
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
			final()
		case <-done:
		}
	}()
}
