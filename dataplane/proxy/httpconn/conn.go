package httpconn

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
)

// ServeConn serves HTTP/1.1 requests on conn until the client closes it or ctx ends, and
// blocks until then. It counts http.<stat_prefix>.downstream_cx_total/active.
func ServeConn(ctx context.Context, cfg *Config, deps Deps, conn net.Conn, ds Downstream) {
	st := newHCMStats(deps.Stats, cfg.StatPrefix)
	st.cxTotal.Inc()
	st.cxActive.Inc()
	defer st.cxActive.Dec()

	l := newOneConnListener(conn)
	srv := &http.Server{
		Handler:  &router{cfg: cfg, deps: deps, ds: ds, st: st},
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
				// Connection: close on the next response, and close the connection now if
				// it is idle.
				srv.SetKeepAlivesEnabled(false)
				st.scope.Counter("downstream_cx_drain_close").Inc()
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
