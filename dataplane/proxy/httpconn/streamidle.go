package httpconn

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
)

// errStreamIdle is the cause of a request context the stream idle timeout ended.
var errStreamIdle = errors.New("stream idle timeout")

// streamIdle is one stream's idle timer: body reads and response writes stamp
// activity, and the timer re-arms itself for the remainder instead of being reset per
// chunk.
type streamIdle struct {
	timeout time.Duration
	last    atomic.Int64 // unix nanoseconds of the last activity
	timer   *time.Timer
	cancel  context.CancelCauseFunc
}

func (s *streamIdle) touch() { s.last.Store(time.Now().UnixNano()) }

func (s *streamIdle) check() {
	idle := time.Since(time.Unix(0, s.last.Load()))
	if idle >= s.timeout {
		s.cancel(errStreamIdle)
		return
	}
	s.timer.Reset(s.timeout - idle)
}

// watchStreamIdle arms the stream idle timeout of x (Envoy's stream_idle_timeout): the
// request's context ends with errStreamIdle once no byte moved for the timeout. It
// returns the function that disarms it.
func (rt *router) watchStreamIdle(x *exchange) func() {
	ctx, cancel := context.WithCancelCause(x.r.Context())
	s := &streamIdle{timeout: rt.cfg.StreamIdleTimeout, cancel: cancel}
	s.touch()
	s.timer = time.AfterFunc(s.timeout, s.check)
	x.r = x.r.WithContext(ctx)
	x.w.stamp = s
	if x.rx != nil {
		x.rx.stamp = s
	}
	return func() {
		s.timer.Stop()
		cancel(nil)
	}
}

// idleTimedOut reports whether the stream idle timeout ended x's request.
func idleTimedOut(x *exchange) bool {
	return errors.Is(context.Cause(x.r.Context()), errStreamIdle)
}

// streamIdleReply answers a stream whose idle timeout fired before its response
// started, as Envoy: 408 "stream timeout", flag SI, downstream_rq_idle_timeout.
func (rt *router) streamIdleReply(x *exchange) int {
	rt.st.scope.Counter("downstream_rq_idle_timeout").Inc()
	x.info.Flags |= accesslog.StreamIdleTimeout
	x.info.CodeDetails = "stream_idle_timeout"
	return rt.localReply(x, http.StatusRequestTimeout, "stream timeout")
}
