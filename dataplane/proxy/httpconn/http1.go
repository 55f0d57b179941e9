package httpconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/h1head"
	"github.com/meshlab/meshlab/dataplane/rawio"
)

// HTTP/1.1 downstream codec. Envoy's HTTP/1 codec reads a request, runs the filter chain
// and writes the response on the connection's one worker thread; this loop does the same
// on the connection's one goroutine. net/http's server costs a goroutine hand-off per
// request (its background read), which was the largest cost of the proxy after syscalls.
// Request heads are read by h1head (net/http's ReadRequest for what its fast path leaves);
// responses are framed here.

const (
	// maxRequestHeaderBytes is Envoy's default max_request_headers_kb (60 KiB); a larger
	// request head is answered 431.
	maxRequestHeaderBytes = 60 << 10
	// maxDrainBody is how much of a request body the handler left unread is discarded to
	// keep the connection; a longer rest closes it (net/http's server does the same).
	maxDrainBody = 256 << 10
)

// disconnectWatchDelay is how long a request may run before its connection is watched
// for the client going away (which cancels the request, as Envoy's downstream reset
// does): between one and two delays after it started. Watching costs a goroutine, so
// fast requests never pay for it; the connection's watch timer is set at most once per
// delay (see armWatch), so the delay also bounds how often it runs. A variable so that a
// test can keep the watch out of what it checks.
var disconnectWatchDelay = 50 * time.Millisecond

// Connection states, for closing idle connections on drain.
const (
	h1New    int32 = iota // no request read yet
	h1Active              // a request is being read or served
	h1Idle                // between requests
	h1Closed              // closed by a drain
)

var (
	h1Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	h1Writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

// errHeadTooLarge is what the limited reader returns once a request head is too long.
var errHeadTooLarge = errors.New("request header too large")

// h1Conn is one downstream HTTP/1.x connection.
type h1Conn struct {
	conn    net.Conn
	lr      headLimiter
	br      *bufio.Reader
	bw      *bufio.Writer
	handler http.Handler
	st      *hcmStats
	remote  string
	tls     *tls.ConnectionState // of a TLS connection, read once: the handshake is over
	idle    time.Duration        // the HCM's idle_timeout between requests; 0: none

	state    atomic.Int32
	draining atomic.Bool // the next response is the connection's last
	drainOne sync.Once

	// The disconnect watch of the request being served. One timer per connection (a timer
	// per request was two allocations and a timer heap entry), left set when a request
	// ends (see armWatch).
	watchMu      sync.Mutex
	watchOpen    bool // a request is being served: its watch may be armed
	watchArmed   bool // the request being served is to be watched once it ran for the delay
	watchPending bool // the timer is set
	watchAt      time.Time
	watchCancel  context.CancelFunc
	watchTimer   *time.Timer   // nil until the connection's first request armed it
	watchDone    chan struct{} // closed when the watch goroutine returned; nil if none ran
	aborting     atomic.Bool
	// abort interrupts the upstream exchange of the request being served; fired with
	// the request's cancel by the disconnect watch and by shutdown (cluster.Abort).
	abort cluster.Abort
	// rctx is the context of the connection's requests, made with its first: a request
	// whose context ends (the client went away, shutdown) is the connection's last, so
	// one context serves them all (a context per request cost two allocations and its
	// registration with the connection's context). rcancel ends it with the connection.
	rctx    context.Context
	rcancel context.CancelFunc
}

// headLimiter reads from the connection, failing with errHeadTooLarge once more than
// remain bytes were read while a request head is being read.
type headLimiter struct {
	r       io.Reader
	limited bool
	remain  int
}

func (l *headLimiter) Read(p []byte) (int, error) {
	if !l.limited {
		return l.r.Read(p)
	}
	if l.remain <= 0 {
		return 0, errHeadTooLarge
	}
	if len(p) > l.remain {
		p = p[:l.remain]
	}
	n, err := l.r.Read(p)
	l.remain -= n
	return n, err
}

// serveHTTP1 serves HTTP/1.x on conn until the client closes it, a response ends it, or
// ctx ends. On drain (deps.Draining, deps.DrainClose) the next response carries
// "connection: close" and an idle connection is closed; a connection that has not sent its
// first request yet is left open (its client may be writing that request right now and
// would not retry on a connection it never used): it serves one request under the
// drained configuration, as in Envoy.
func serveHTTP1(ctx context.Context, deps Deps, conn net.Conn, handler http.Handler, st *hcmStats, idle time.Duration) {
	c := &h1Conn{conn: conn, handler: handler, st: st, idle: idle}
	c.lr.r = rawio.Reader(conn)
	c.br = h1Readers.Get().(*bufio.Reader)
	c.br.Reset(&c.lr)
	c.bw = h1Writers.Get().(*bufio.Writer)
	c.bw.Reset(rawio.Writer(conn))
	if a := conn.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	defer func() {
		_ = conn.Close()
		if c.rcancel != nil {
			c.rcancel()
		}
		c.watchMu.Lock()
		if c.watchTimer != nil {
			c.watchTimer.Stop()
		}
		c.watchPending = false
		c.watchMu.Unlock()
		c.br.Reset(nil)
		h1Readers.Put(c.br)
		c.bw.Reset(nil)
		h1Writers.Put(c.bw)
	}()
	stop := context.AfterFunc(ctx, func() {
		_ = conn.Close()
		c.abort.Fire() // after ctx, which the request's context derives from, ended
	})
	defer stop()
	done := make(chan struct{})
	defer close(done)
	if deps.Draining != nil {
		go func() {
			select {
			case <-deps.Draining:
				c.drain()
			case <-done:
			}
		}()
	}
	for c.serveOne(ctx, deps) {
	}
}

// tlsState returns the connection's TLS state for its requests, nil for plaintext.
func (c *h1Conn) tlsState() *tls.ConnectionState {
	if c.tls == nil {
		if cs, ok := c.conn.(connectionStater); ok {
			s := cs.ConnectionState()
			c.tls = &s
		}
	}
	return c.tls
}

// drain makes the next response the connection's last, and closes the connection now if
// it is idle between requests.
func (c *h1Conn) drain() {
	c.drainOne.Do(func() {
		c.draining.Store(true)
		c.st.scope.Counter("downstream_cx_drain_close").Inc()
		if c.state.CompareAndSwap(h1Idle, h1Closed) {
			_ = c.conn.Close()
		}
	})
}

// serveOne reads and serves one request; it reports whether the connection stays open.
func (c *h1Conn) serveOne(ctx context.Context, deps Deps) bool {
	if c.state.Load() != h1New {
		c.state.Store(h1Idle)
		if c.draining.Load() {
			return false
		}
	}
	c.lr.limited, c.lr.remain = true, maxRequestHeaderBytes
	if c.idle > 0 && c.br.Buffered() == 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	if _, err := c.br.Peek(1); err != nil {
		var ne net.Error
		if c.idle > 0 && errors.As(err, &ne) && ne.Timeout() {
			c.st.scope.Counter("downstream_cx_idle_timeout").Inc()
		}
		return false // closed by the client, a drain, ctx or the idle timeout
	}
	if c.idle > 0 {
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	if !c.state.CompareAndSwap(h1Idle, h1Active) && !c.state.CompareAndSwap(h1New, h1Active) {
		return false // a drain closed it as the request arrived
	}
	// The request's context is made before its head is read, so the parser builds the
	// request with it (WithContext's copy of a parsed request was an allocation). It is
	// the connection's (rctx): cancelled, it ends the connection after this request.
	if c.rctx == nil {
		c.rctx, c.rcancel = context.WithCancel(ctx)
	}
	rctx, cancel := c.rctx, c.rcancel
	c.abort.Reset()
	if ctx.Err() != nil {
		c.abort.Fire() // shut down while the request arrived: its AfterFunc already ran
	}
	req, err := h1head.ReadRequest(rctx, c.br)
	c.lr.limited = false
	if err != nil {
		c.codecError(err)
		return false
	}
	if req.ProtoMajor != 1 {
		c.codecError(errors.New("unsupported protocol version"))
		return false
	}
	if req.ProtoAtLeast(1, 1) && req.Host == "" && len(req.Header["Host"]) == 0 {
		c.codecError(errors.New("missing host header"))
		return false
	}
	if deps.DrainClose != nil && deps.DrainClose() {
		c.drain()
	}
	req.RemoteAddr = c.remote
	req.TLS = c.tlsState()
	w := &h1Response{c: c, req: req, contentLength: -1} // header: made by Header or adopted
	if !req.ProtoAtLeast(1, 1) {
		w.keepAlive10 = wantsKeepAlive(req)
	}
	if expect := req.Header.Get("Expect"); expect != "" {
		if !req.ProtoAtLeast(1, 1) || !equalFoldASCII(expect, "100-continue") {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusExpectationFailed)
			w.closeAfter = true
			w.finish()
			return false
		}
		// Envoy answers 100-continue itself and does not forward the expectation.
		req.Header.Del("Expect")
		if req.ContentLength != 0 {
			w.continued = &continueReader{ReadCloser: req.Body, w: w}
			req.Body = w.continued
		}
	}
	c.watchMu.Lock()
	c.watchOpen = true
	c.watchMu.Unlock()
	if req.Body == http.NoBody || req.Body == nil {
		c.armWatch(cancel)
	} else {
		req.Body = &watchedBody{ReadCloser: req.Body, arm: func() { c.armWatch(cancel) }}
	}
	c.handler.ServeHTTP(w, req)
	c.stopWatch()
	if w.hijacked {
		return false // an upgraded stream ended: the handler closed the connection
	}
	if !w.finish() {
		return false
	}
	if w.closeAfter {
		return false
	}
	// Discard what the handler left of the body, or give up the connection.
	if req.Body != nil && req.Body != http.NoBody {
		n, err := io.CopyN(io.Discard, req.Body, maxDrainBody+1)
		// A body the upstream transport already closed was drained by its Close
		// (net/http reads a server-side request body to its end on Close): the
		// connection is positioned at the next request.
		if n > maxDrainBody || (err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, http.ErrBodyReadAfterClose)) {
			return false
		}
		_ = req.Body.Close()
	}
	return !w.closeAfter && rctx.Err() == nil
}

// codecError answers a request the codec could not read, as Envoy does
// (http1.codec_error: 400; a head over max_request_headers_kb or with more fields than
// max_headers_count: 431), and counts it.
func (c *h1Conn) codecError(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return
	}
	start := time.Now()
	c.st.scope.Counter("downstream_cx_protocol_error").Inc()
	code, body, details := http.StatusBadRequest, "Bad Request", "http1.codec_error"
	switch {
	case errors.Is(err, errHeadTooLarge):
		code, body, details = http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large", "http1.headers_too_large"
	case errors.Is(err, h1head.ErrTooManyHeaders):
		code, body, details = http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large", "http1.too_many_headers"
	case errors.Is(err, h1head.ErrContentLengthAndChunked):
		details = "http1.content_length_and_chunked_not_allowed"
	}
	c.st.rqTotal.Inc()
	c.st.record(code)
	w := &h1Response{c: c, req: &http.Request{Method: http.MethodGet, ProtoMajor: 1, ProtoMinor: 1}, header: http.Header{}, contentLength: -1, closeAfter: true}
	w.header.Set("Content-Length", strconv.Itoa(len(body)))
	w.header.Set("Content-Type", "text/plain")
	rt, _ := c.handler.(*router)
	if rt != nil {
		rt.setServer(w.header)
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
	if rt != nil && len(rt.cfg.AccessLogs) > 0 {
		rt.logCodecError(start, code, details, w.written) // before the close the client waits for
	}
	w.finish()
}

// armWatch starts watching the connection for the client going away once the request
// ran for disconnectWatchDelay; cancel cancels the request then. The timer is set only
// when it is not set already: a timer set for an earlier request sets itself again for
// this one's remaining delay when it runs. Setting a timer on every request could cost a
// second thread's wake-up on many of them (a Reset to a time earlier than the P's next
// timer wakes the network poller or starts a spinning thread: runtime.wakeNetPoller);
// now a connection busy with short requests sets it about once per delay.
func (c *h1Conn) armWatch(cancel context.CancelFunc) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if !c.watchOpen || c.watchArmed {
		return
	}
	c.watchArmed, c.watchAt, c.watchCancel = true, time.Now(), cancel
	if c.watchPending {
		return
	}
	c.watchPending = true
	if c.watchTimer == nil {
		c.watchTimer = time.AfterFunc(disconnectWatchDelay, c.startWatch)
	} else {
		c.watchTimer.Reset(disconnectWatchDelay)
	}
}

// startWatch is the watch timer's function: it starts watching the connection once the
// request being served ran for disconnectWatchDelay. Between requests it does nothing
// (the next request sets the timer); for a request armed less than the delay ago, it
// sets the timer for the rest.
func (c *h1Conn) startWatch() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.watchPending = false
	if !c.watchArmed || c.watchDone != nil {
		return
	}
	if d := disconnectWatchDelay - time.Since(c.watchAt); d > 0 {
		c.watchPending = true
		c.watchTimer.Reset(d)
		return
	}
	done := make(chan struct{})
	c.watchDone = done
	cancel := c.watchCancel
	go func() {
		defer close(done)
		// The request body is read to its end, so the next bytes are the next
		// request (kept in the buffer) or the end of the connection.
		if _, err := c.br.Peek(1); err != nil && !c.aborting.Load() {
			cancel()
			c.abort.Fire()
		}
	}()
}

// stopWatch ends the disconnect watch of the request that finished: the watching read,
// if one started, is interrupted and waited for. The timer stays set (see armWatch).
func (c *h1Conn) stopWatch() {
	c.watchMu.Lock()
	armed, done := c.watchArmed, c.watchDone
	c.watchArmed, c.watchCancel, c.watchDone, c.watchOpen = false, nil, nil, false
	c.watchMu.Unlock()
	if !armed {
		return
	}
	if done == nil {
		return
	}
	c.aborting.Store(true)
	_ = c.conn.SetReadDeadline(expiredDeadline)
	<-done
	_ = c.conn.SetReadDeadline(time.Time{})
	c.aborting.Store(false)
}

// expiredDeadline is a deadline in the past: setting it interrupts a blocked read.
var expiredDeadline = time.Unix(1, 0)

// watchedBody arms the disconnect watch once the request body was read to its end.
type watchedBody struct {
	io.ReadCloser
	arm   func()
	armed bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.armed {
		b.armed = true
		b.arm()
	}
	return n, err
}

// continueReader sends "100 Continue" before the first read of the request body.
type continueReader struct {
	io.ReadCloser
	w    *h1Response
	sent bool
}

func (r *continueReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		if !r.w.wroteHeader {
			_, _ = r.w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			_ = r.w.c.bw.Flush()
		}
	}
	return r.ReadCloser.Read(p)
}

// h1Response writes one HTTP/1.x response: Content-Length framing when the handler set
// it, chunked otherwise (close-delimited for HTTP/1.0), trailers after a chunked body.
type h1Response struct {
	c             *h1Conn
	req           *http.Request
	header        http.Header
	wroteHeader   bool
	noBody        bool
	chunked       bool
	contentLength int64 // -1: not known
	written       int64
	closeAfter    bool
	aborted       bool
	hijacked      bool // an upgrade took the connection over
	// continued is the body of a request that expects 100-continue; answered before the
	// body was asked for, the body never comes and the connection cannot be reused.
	continued *continueReader
	// keepAlive10 is whether an HTTP/1.0 request asked to keep the connection, read from
	// its head as parsed: the router mutates the request's header in place for upstream
	// (Envoy's one header map), and removes its Connection field.
	keepAlive10 bool
}

func (w *h1Response) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header, 8)
	}
	return w.header
}

// adoptHeader makes h the response's header map, as Envoy's router hands the upstream
// response's header map on downstream rather than copying it (the copy was a map and
// its fields per request). Fields set before and absent from h are kept. It reports
// false once the header was written.
func (w *h1Response) adoptHeader(h http.Header) bool {
	if w.wroteHeader {
		return false
	}
	for k, vs := range w.header {
		if _, ok := h[k]; !ok {
			h[k] = vs
		}
	}
	w.header = h
	return true
}

// upstreamAbort is the connection's hook for r's upstream exchange (see router's
// upstreamAborter); nil for a request it did not make.
func (w *h1Response) upstreamAbort(r *http.Request) *cluster.Abort {
	if r != w.req {
		return nil
	}
	return &w.c.abort
}

// Hijack hands the connection to the router for an upgraded stream (a 101 it forwards
// itself): the disconnect watch stops reading, and the buffered reader keeps the bytes
// the client sent after its request.
func (w *h1Response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.wroteHeader || w.hijacked {
		return nil, nil, errors.New("hijack connection: response already started")
	}
	w.c.stopWatch()
	w.hijacked = true
	return w.c.conn, bufio.NewReadWriter(w.c.br, w.c.bw), nil
}

// WriteHeader writes the status line and headers into the connection's buffer.
func (w *h1Response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	h, r := w.Header(), w.req
	w.noBody = r.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified || code < 200
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		} else {
			h.Del("Content-Length")
		}
	}
	switch {
	case code == http.StatusNoContent || code < 200:
		h.Del("Content-Length")
		h.Del("Transfer-Encoding")
	case w.noBody:
		h.Del("Transfer-Encoding")
	case w.contentLength >= 0:
		h.Del("Transfer-Encoding")
	case r.ProtoAtLeast(1, 1):
		w.chunked = true
		h.Set("Transfer-Encoding", "chunked")
	default:
		w.closeAfter = true // HTTP/1.0: the body ends with the connection
	}
	if r.Close || w.c.draining.Load() || (!r.ProtoAtLeast(1, 1) && !w.keepAlive10) || (w.continued != nil && !w.continued.sent) {
		w.closeAfter = true
	}
	h.Del("Connection")
	if w.closeAfter {
		h["Connection"] = []string{"close"}
	} else if !r.ProtoAtLeast(1, 1) {
		h["Connection"] = []string{"keep-alive"}
	}
	if _, ok := h["Date"]; !ok {
		h["Date"] = []string{httpDate()}
	}
	bw := w.c.bw
	if r.ProtoAtLeast(1, 1) || r.ProtoMajor == 0 {
		_, _ = bw.WriteString("HTTP/1.1 ")
	} else {
		_, _ = bw.WriteString("HTTP/1.0 ")
	}
	writeStatus(bw, code)
	writeHeader(bw, h)
	_, _ = bw.WriteString("\r\n")
}

func (w *h1Response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody || len(p) == 0 {
		return len(p), nil
	}
	bw := w.c.bw
	if w.chunked {
		_, _ = bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		n, err := bw.Write(p)
		_, _ = bw.WriteString("\r\n")
		w.written += int64(n)
		return n, err
	}
	if w.contentLength >= 0 && w.written+int64(len(p)) > w.contentLength {
		p = p[:w.contentLength-w.written]
		n, _ := bw.Write(p)
		w.written += int64(n)
		return n, http.ErrContentLength
	}
	n, err := bw.Write(p)
	w.written += int64(n)
	return n, err
}

// FlushError sends what is buffered. A body whose Content-Length is complete is left for
// the end of the request, so a small response goes out in one write.
func (w *h1Response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.contentLength >= 0 && w.written >= w.contentLength {
		return nil
	}
	return w.c.bw.Flush()
}

// Abort ends the response unfinished (the upstream reset mid-body): the connection is
// closed without completing the body, so the client sees the reset as with Envoy.
func (w *h1Response) Abort() { w.aborted = true }

// finish completes the response and sends it; it reports whether the connection can
// carry another request.
func (w *h1Response) finish() bool {
	if w.req.Context().Err() != nil && !w.wroteHeader {
		return false // the client went away
	}
	if !w.wroteHeader {
		if _, ok := w.header["Content-Length"]; !ok && !w.aborted {
			w.Header()["Content-Length"] = []string{"0"}
		}
		w.WriteHeader(http.StatusOK)
	}
	bw := w.c.bw
	switch {
	case w.aborted:
		_ = bw.Flush()
		return false
	case w.chunked:
		_, _ = bw.WriteString("0\r\n")
		writeTrailers(bw, w.header)
		_, _ = bw.WriteString("\r\n")
	case !w.noBody && w.contentLength >= 0 && w.written < w.contentLength:
		_ = bw.Flush()
		return false // a short body: the connection cannot be reused
	}
	if err := bw.Flush(); err != nil {
		return false
	}
	if w.closeAfter {
		if tc, ok := w.c.conn.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		return false
	}
	return true
}

// wantsKeepAlive reports whether an HTTP/1.0 request asked to keep the connection: a
// keep-alive token in its Connection fields ("keep-alive, x-hop" is one).
func wantsKeepAlive(r *http.Request) bool {
	for _, v := range r.Header["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			if equalFoldASCII(strings.TrimSpace(t), "keep-alive") {
				return true
			}
		}
	}
	return false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
