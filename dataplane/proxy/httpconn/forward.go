package httpconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// maxBufferedBody is the largest request body buffered for retries and mirrors (Envoy's
// default per-connection buffer limit); a larger body disables both.
const maxBufferedBody = 1 << 20

// attempt is the outcome of one upstream try.
type attempt struct {
	resp   *http.Response
	rqTime *stats.Histogram // the cluster's upstream_rq_time, set with resp
	perTry *perTry          // the per-try timer of a response; nil without one
	admit  func()           // releases the circuit breaker's slot of a response
	host   cluster.Host
	err    error
	kind   failure
	cl     *cluster.Cluster // the cluster of a response
}

type failure int

const (
	failNone failure = iota
	failConnect
	failReset
	failPerTryTimeout
	failGlobalTimeout
	failOverflow
	failNoHost
)

// forward sends the request to cl with the route's timeout, retry policy and mirrors,
// and streams the response back.
func (rt *router) forward(x *exchange, cl *cluster.Cluster) int {
	x.routed = time.Now()
	route := x.route
	ctx := x.upstreamContext(x.r.Context())
	timeout := route.timeoutFor(x.r)
	if x.r != x.abortReq {
		x.abort = nil // something else ends ctx too: the pool watches ctx
	}
	switch {
	case timeout > 0 && x.abort != nil:
		// The route timeout ends ctx (its cause DeadlineExceeded) and fires the
		// connection's hook, as Envoy's router timer resets the upstream request: the
		// pool needs no watch of ctx (a context.AfterFunc, five allocations).
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		hook, gen := x.abort, x.abort.Generation()
		t := time.AfterFunc(timeout, func() {
			cancel(context.DeadlineExceeded)
			hook.FireGeneration(gen)
		})
		defer func() {
			t.Stop()
			cancel(nil)
		}()
	case timeout > 0:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	policy := route.Retry
	expected := timeout
	if policy != nil && policy.PerTryTimeout > 0 && (expected == 0 || policy.PerTryTimeout < expected) {
		expected = policy.PerTryTimeout
	}
	out := rt.outgoing(ctx, x, expected)
	if rt.cfg.Peer != nil {
		rt.cfg.Peer.InjectUpstream(out.Header, cl.Config().Name, clusterIstio(cl))
	}
	var body []byte
	if out.Body != nil && (policy != nil || len(route.Mirrors) > 0) {
		b, err := io.ReadAll(io.LimitReader(out.Body, maxBufferedBody+1))
		if err != nil {
			x.info.Flags |= accesslog.DownstreamConnectionTermination
			return rt.localReply(x, http.StatusBadRequest, "")
		}
		if len(b) > maxBufferedBody {
			out.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), out.Body))
			policy = nil // too large to replay: no retries, no mirror (as Envoy's buffer overflow)
		} else {
			body = b
		}
	}
	if len(route.Mirrors) > 0 && (body != nil || out.Body == nil) {
		rt.mirror(x, out, body)
	}
	var tried []cluster.Host
	retries := 0
	endRetry := func() {} // releases the max_retries slot of the retry in flight
	defer func() { endRetry() }()
	for {
		if x.vh != nil && x.vh.AttemptCount {
			out.Header.Set("x-envoy-attempt-count", strconv.Itoa(retries+1))
		}
		a := rt.try(ctx, x, cl, out, body, policy, tried)
		endRetry()
		endRetry = func() {}
		retriable := false
		if policy != nil {
			switch a.kind {
			case failNone:
				retriable = policy.retriableStatus(a.resp.StatusCode, a.resp.Header)
			case failConnect, failReset, failPerTryTimeout:
				retriable = policy.retriableReset(a.kind == failConnect)
			}
		}
		if retriable && retries >= policy.NumRetries {
			cl.Stats().UpstreamRqRetryLimit.Inc()
			x.info.Flags |= accesslog.UpstreamRetryLimitExceeded
			retriable = false
		}
		if retriable {
			if done, ok := cl.AdmitRetry(); ok {
				endRetry = done
				retries++
				cl.Stats().UpstreamRqRetry.Inc()
				cl.Stats().UpstreamRqRetryBackoffExp.Inc()
				a.discard()
				if !rt.backoff(ctx, policy, retries) {
					return rt.fail(x, cl, attempt{kind: failGlobalTimeout})
				}
				tried = append(tried, a.host) // only a retry needs them: no slice per request
				// The retry goes to the cluster the route names as it is now, as Envoy's
				// router looks it up again for every retry: a CDS update that replaced
				// it (a changed cluster is a new one here) since the first attempt
				// holds the hosts EDS gave it since, and the replaced one's hosts may be
				// gone (a rollout's old pod: each try waited out its connect timeout).
				// A cluster CDS removed meanwhile answers no healthy upstream.
				next, ok := rt.deps.Clusters.Get(x.info.UpstreamCluster)
				if !ok {
					return rt.fail(x, cl, attempt{kind: failNoHost})
				}
				cl = next
				continue
			}
		}
		if retries > 0 && a.kind == failNone && (policy == nil || !policy.retriableStatus(a.resp.StatusCode, a.resp.Header)) {
			cl.Stats().UpstreamRqRetrySuccess.Inc()
		}
		if a.kind != failNone {
			return rt.fail(x, cl, a)
		}
		// Envoy ignores a per-try timeout once the downstream response started
		// (UpstreamRequest::onPerTryTimeout): the response goes on up to the route timeout.
		a.perTry.disarm()
		return rt.respond(x, a)
	}
}

// backoff sleeps Envoy's fully jittered exponential back-off before retry n (1-based):
// a random time below min(base*(2^n-1), max). It reports false when ctx ended first.
func (rt *router) backoff(ctx context.Context, p *RetryPolicy, n int) bool {
	limit := p.MaxInterval
	if n < 31 {
		if d := p.BaseInterval * time.Duration((1<<n)-1); d < limit {
			limit = d
		}
	}
	if limit <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(time.Duration(rand.Int64N(int64(limit))))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// try makes one upstream attempt under the per-try timeout.
func (rt *router) try(ctx context.Context, x *exchange, cl *cluster.Cluster, out *http.Request, body []byte, p *RetryPolicy, tried []cluster.Host) attempt {
	var host cluster.Host
	var err error
	if len(tried) > 0 && p != nil && p.PreviousHosts {
		host, err = cl.PickAvoiding(rt.ds.Local, tried, p.HostAttempts)
	} else {
		host, err = cl.Pick(rt.ds.Local)
	}
	if err != nil {
		return attempt{kind: failNoHost, err: err}
	}
	release, err := cl.Admit(ctx)
	if err != nil {
		if errors.Is(err, cluster.ErrOverflow) {
			return attempt{kind: failOverflow, host: host, err: err}
		}
		return attempt{kind: failGlobalTimeout, host: host, err: err}
	}
	tctx := ctx
	var pt *perTry
	abort := x.abort // only the downstream connection and the router end tctx: the hook stands for it
	if p != nil && p.PerTryTimeout > 0 {
		pt = startPerTry(ctx, abort, p.PerTryTimeout)
		tctx = pt.ctx
	}
	req := out
	if tctx != out.Context() || body != nil || len(tried) > 0 {
		// A copy with its own URL (RoundTripUpstream sets its scheme and host) and
		// body, for a per-try timeout, a replayed body or a retry: an earlier attempt's
		// transport may still hold the request it was given. The first plain attempt
		// sends out itself (a copy was two allocations per request).
		req = out.WithContext(tctx)
		req.Close = false // as outgoing made it: the first attempt may have set it
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		u := *out.URL
		req.URL = &u
	}
	var up *cluster.UpstreamInfo
	if len(rt.cfg.AccessLogs) > 0 || rt.cfg.IstioStats != nil {
		up = &x.upstream // the last attempt's connection is the one logged, as in Envoy
	}
	resp, err := cl.RoundTripAbortable(req, host, up, abort)
	if err == nil {
		cl.ReportResult(host, resp.StatusCode)
		cl.Stats().RecordResponse(resp.StatusCode)
		return attempt{resp: resp, rqTime: cl.Stats().UpstreamRqTime, host: host, perTry: pt, admit: release, cl: cl}
	}
	pt.stop()
	release()
	a := attempt{host: host, err: err}
	var opErr *net.OpError
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		a.kind = failGlobalTimeout
		cl.ReportResult(host, http.StatusGatewayTimeout)
	case ctx.Err() != nil:
		a.kind = failReset // downstream went away
	case tctx.Err() != nil:
		a.kind = failPerTryTimeout
		cl.Stats().UpstreamRqPerTryTimeout.Inc()
		cl.ReportResult(host, http.StatusGatewayTimeout)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		a.kind = failConnect
		cl.ReportResult(host, http.StatusServiceUnavailable)
	default:
		a.kind = failReset
		cl.ReportResult(host, http.StatusServiceUnavailable)
	}
	rt.deps.Logger.Debug("upstream request failed", "cluster", cl.Name(), "host", host.String(), "err", err)
	return a
}

// perTry is an attempt's per-try timeout on the router's own timer, as Envoy's per-try
// timer resets its upstream request: when it runs out it ends the attempt's context
// (cause DeadlineExceeded) and, under the connection's hook, interrupts the attempt's
// exchange (cluster.Abort.Interrupt), so the pool needs no watch of the context (a
// context.AfterFunc, five allocations); without the hook the pool's watch of the
// context does it. The request goes on: the router may retry. Once the response
// starts downstream the timer is disarmed, as Envoy ignores a per-try timeout then.
type perTry struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	abort  *cluster.Abort // nil: the pool watches ctx
	gen    uint64         // the request the attempt belongs to (Abort.Generation)
	t      *time.Timer

	mu      sync.Mutex
	stopped bool
}

func startPerTry(ctx context.Context, abort *cluster.Abort, d time.Duration) *perTry {
	pt := &perTry{abort: abort}
	if abort != nil {
		pt.gen = abort.Generation()
	}
	pt.ctx, pt.cancel = context.WithCancelCause(ctx)
	pt.t = time.AfterFunc(d, pt.expire)
	return pt
}

func (pt *perTry) expire() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.stopped {
		return
	}
	pt.cancel(context.DeadlineExceeded)
	if pt.abort != nil {
		pt.abort.Interrupt(pt.gen)
	}
}

// disarm ends the timer, leaving the attempt's context alive for its response (nil:
// no timer). Once it returns the timer interrupts nothing, so a timer that ran out as
// its attempt ended cannot reach the next attempt's exchange.
func (pt *perTry) disarm() {
	if pt == nil {
		return
	}
	pt.mu.Lock()
	pt.stopped = true
	pt.mu.Unlock()
	pt.t.Stop()
}

// stop ends the timer and the attempt's context (nil: no timer).
func (pt *perTry) stop() {
	if pt == nil {
		return
	}
	pt.disarm()
	pt.cancel(nil)
}

// serviceTimes are x-envoy-upstream-service-time's values below 100 ms, shared by
// every response (see sharedValues): Header.Set's slice was an allocation per response.
var serviceTimes = func() (v [100][]string) {
	for ms := range v {
		v[ms] = sharedValues(strconv.Itoa(ms))
	}
	return v
}()

// serviceTime is x-envoy-upstream-service-time's value for d: whole milliseconds.
func serviceTime(d time.Duration) []string {
	if ms := d.Milliseconds(); ms >= 0 && ms < int64(len(serviceTimes)) {
		return serviceTimes[ms]
	}
	return []string{strconv.FormatInt(d.Milliseconds(), 10)}
}

// release ends the attempt's per-try timeout and frees its circuit breaker slot.
func (a *attempt) release() {
	a.perTry.stop()
	if a.admit != nil {
		a.admit()
	}
}

// discard drops a response that will be retried.
func (a *attempt) discard() {
	if a.resp != nil {
		_, _ = io.CopyN(io.Discard, a.resp.Body, 64*1024)
		a.resp.Body.Close()
	}
	a.release()
}

// fail sends the local reply for an attempt that got no response.
func (rt *router) fail(x *exchange, cl *cluster.Cluster, a attempt) int {
	if a.host.Addr.IsValid() || a.host.Pipe != "" {
		x.info.UpstreamHost = a.host.String()
	}
	if rt.cfg.StreamIdleTimeout > 0 && idleTimedOut(x) {
		return rt.streamIdleReply(x)
	}
	switch a.kind {
	case failNoHost:
		x.info.Flags |= accesslog.NoHealthyUpstream
		x.info.CodeDetails = "no_healthy_upstream"
		return rt.localReply(x, http.StatusServiceUnavailable, BodyNoHealthyUpstream)
	case failOverflow:
		x.info.Flags |= accesslog.UpstreamOverflow
		x.info.CodeDetails = "upstream_reset_before_response_started{overflow}"
		// Envoy's router marks a dropped (overflowed) request so clients can back off.
		x.w.Header().Set("X-Envoy-Overloaded", "true")
		return rt.localReply(x, http.StatusServiceUnavailable, BodyOverflow)
	case failGlobalTimeout, failPerTryTimeout:
		if x.r.Context().Err() != nil {
			x.info.Flags |= accesslog.DownstreamConnectionTermination
			return 0
		}
		if a.kind == failGlobalTimeout {
			cl.Stats().UpstreamRqTimeout.Inc()
		}
		cl.Stats().RecordResponse(http.StatusGatewayTimeout)
		x.info.Flags |= accesslog.UpstreamRequestTimeout
		x.info.CodeDetails = "upstream_response_timeout"
		return rt.localReply(x, http.StatusGatewayTimeout, BodyTimeout)
	case failConnect:
		cl.Stats().RecordResponse(http.StatusServiceUnavailable)
		x.info.Flags |= accesslog.UpstreamConnectionFailure
		x.info.CodeDetails = "upstream_reset_before_response_started{connection_failure}"
		x.info.UpstreamTransportFailureReason = cluster.TransportFailureReason(a.err)
		if he := (*tlsctx.HandshakeError)(nil); errors.As(a.err, &he) {
			x.info.CodeDetails = "upstream_reset_before_response_started{connection_failure," + he.Detail() + "}"
		}
		return rt.localReply(x, http.StatusServiceUnavailable, BodyConnectFailure)
	}
	if x.r.Context().Err() != nil {
		x.info.Flags |= accesslog.DownstreamConnectionTermination
		return 0
	}
	cl.Stats().RecordResponse(http.StatusServiceUnavailable)
	x.info.Flags |= accesslog.UpstreamConnectionTermination
	x.info.CodeDetails = "upstream_reset_before_response_started{connection_termination}"
	return rt.localReply(x, http.StatusServiceUnavailable, BodyConnectReset)
}

// headerAdopter is a codec's response writer that can take the upstream response's header
// map as its own (h1Response.adoptHeader).
type headerAdopter interface{ adoptHeader(http.Header) bool }

// respond streams an upstream response downstream with the response header mutations.
func (rt *router) respond(x *exchange, a attempt) int {
	defer a.release()
	resp := a.resp
	defer resp.Body.Close()
	if len(rt.cfg.AccessLogs) > 0 { // only %UPSTREAM_HOST% reads it
		x.info.UpstreamHost = a.host.String()
	}
	x.upHost = a.host
	var upgrade string // the hop-by-hop removal below takes it off the adopted header
	if x.upgrade != "" {
		upgrade = resp.Header.Get("Upgrade")
	}
	h := resp.Header
	if ad, ok := x.cw.ResponseWriter.(headerAdopter); !ok || !ad.adoptHeader(h) {
		h = x.w.Header()
		for k, vs := range resp.Header {
			h[k] = vs
		}
	}
	if rt.cfg.Peer != nil {
		rt.cfg.Peer.OnResponse(h, &x.peer, discoveryAddr(a.host))
	}
	delHopByHop(h)
	if x.weighted != nil {
		x.weighted.Headers.resp.apply(h, nil)
	}
	x.route.Headers.resp.apply(h, nil)
	x.vh.Headers.resp.apply(h, nil)
	h["X-Envoy-Upstream-Service-Time"] = serviceTime(time.Since(x.routed))
	if rt.cfg.Tracing != nil {
		rt.decorateResponse(x, h) // trace.go
	}
	code := rt.luaResponse(x, resp.StatusCode, h)
	rt.setServer(h)
	if x.corsOrigin != "" {
		x.corsResponse(h)
	}
	if x.upgrade != "" && resp.StatusCode == http.StatusSwitchingProtocols {
		return rt.tunnel(x, a, h, upgrade)
	}
	x.info.CodeDetails = "via_upstream"
	x.w.WriteHeader(code)
	body := resp.Body
	if rt.cfg.GRPCStats != nil && a.cl != nil && isGRPC(x.r) {
		body = &grpcFrames{ReadCloser: body, counter: a.cl.Stats().Scope().Counter("grpc.response_message_count")}
	}
	copyFlushing(x.w, body)
	if rt.cfg.StreamIdleTimeout > 0 && idleTimedOut(x) {
		// The response had started: Envoy resets the stream.
		rt.st.scope.Counter("downstream_rq_idle_timeout").Inc()
		x.info.Flags |= accesslog.StreamIdleTimeout
		if ab, ok := unwrapAborter(x.w); ok {
			ab.Abort()
		}
	}
	for k, vs := range resp.Trailer { // known once the body is read (gRPC's grpc-status)
		for _, v := range vs {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
	if rt.cfg.GRPCStats != nil && a.cl != nil && isGRPC(x.r) {
		chargeGRPC(a.cl.Stats().Scope(), h)
	}
	// Envoy's router records upstream_rq_time when the upstream response is complete,
	// measured from the end of the downstream request (the body is buffered, so its
	// start here), retries included.
	if a.rqTime != nil {
		a.rqTime.Record(uint64(time.Since(x.start).Milliseconds()))
	}
	return code
}

// mirror sends fire-and-forget shadow copies to the route's mirror clusters, with
// "-shadow" appended to the authority's host as Envoy does. Responses are discarded.
func (rt *router) mirror(x *exchange, out *http.Request, body []byte) {
	for _, m := range x.route.Mirrors {
		if m.Fraction != nil && !m.Fraction.Sample() {
			continue
		}
		cl, ok := rt.deps.Clusters.Get(m.Cluster)
		if !ok {
			continue
		}
		timeout := x.route.Timeout
		if timeout == 0 {
			timeout = DefaultRouteTimeout
		}
		ctx, cancel := context.WithTimeout(x.upstreamContext(context.WithoutCancel(x.r.Context())), timeout)
		req := out.Clone(ctx)
		u := *out.URL
		req.URL = &u
		req.Host = shadowHost(out.Host)
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		go func() {
			defer cancel()
			host, err := cl.Pick(rt.ds.Local)
			if err != nil {
				return
			}
			release, err := cl.Admit(ctx)
			if err != nil {
				return
			}
			defer release()
			resp, err := cl.RoundTrip(req, host)
			if err != nil {
				return
			}
			cl.Stats().RecordResponse(resp.StatusCode)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
}

// shadowHost appends "-shadow" to the host part of an authority: "foo:8080" becomes
// "foo-shadow:8080".
func shadowHost(authority string) string {
	if h, p, ok := cutLast(authority, ":"); ok {
		return h + "-shadow:" + p
	}
	return authority + "-shadow"
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}
