package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/h1head"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/rawio"
)

// h1Pool is a cluster's HTTP/1.1 client for requests whose body can be replayed (none,
// or buffered with GetBody, as the router sends them): the request is written and its
// response read on the calling goroutine over a pooled keep-alive connection. That saves
// http.Transport's two goroutine hand-offs per request (its writeLoop and readLoop), the
// largest per-request cost of the proxy after the socket syscalls. Streaming uploads and
// upgrades still go through http.Transport. Safe for concurrent use.
type h1Pool struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int           // idle connections kept per host
	idleTimeout time.Duration // an idle connection is closed after this long

	mu    sync.Mutex
	idle  map[poolKey][]*h1Conn // most recently used last
	sweep *time.Timer           // closes connections idle too long; nil until needed
	// sweeping: the sweep timer is set. It is set when a connection goes idle and none
	// is, and sets itself again while connections stay idle: a request never touches
	// a timer (a Reset per request could wake a second thread, see put).
	sweeping bool
}

// h1Conn is one upstream HTTP/1.1 connection.
type h1Conn struct {
	pool   *h1Pool
	addr   poolKey
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	since  time.Time // when the connection went idle
	reused bool
	// abort unblocks the connection's reads and writes: the request's cancellation
	// watch, made once per connection instead of a closure per request.
	abort func()
}

func newH1Pool(dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int, idleTimeout time.Duration) *h1Pool {
	return &h1Pool{dial: dial, maxIdle: maxIdle, idleTimeout: idleTimeout, idle: map[poolKey][]*h1Conn{}}
}

// handles reports whether the pool can send req: a plaintext-scheme request (TLS, when
// configured, is inside the dialed connection) that asks for no protocol upgrade and
// may be sent again (see replayable). The pool does not watch idle connections, so it
// finds a connection the server closed only when it uses it, and then resends; a
// request that may not be resent goes through http.Transport, which does watch them.
func (p *h1Pool) handles(req *http.Request) bool {
	return req.URL.Scheme == "http" && req.Header.Get("Upgrade") == "" && replayable(req)
}

// roundTrip sends req on a pooled connection to req.URL.Host; gotConn sees the
// connection before the request is written (it may set req.Close). A request that fails
// on a reused connection before any response byte arrived is sent once more on a newly
// dialed connection, as http.Transport does when a server closed an idle keep-alive
// connection; the other idle connections to that address are closed too, since a
// server that went away took them all.
func (p *h1Pool) roundTrip(req *http.Request, gotConn func(net.Conn), abort *Abort) (*http.Response, error) {
	key := poolKeyOf(req)
	for attempt := 0; ; attempt++ {
		pc, err := p.get(req.Context(), req.URL.Host, key, attempt > 0)
		if err != nil {
			return nil, err
		}
		gotConn(pc.conn)
		resp, retry, err := pc.do(req, abort)
		if err == nil {
			return resp, nil
		}
		if !retry || attempt > 0 || req.Context().Err() != nil {
			return nil, err
		}
		p.closeIdleTo(key)
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req.Body = body
		}
	}
}

// poolKey is the idle pool's key: the dial address and, under an ALPN override
// (istio.alpn), the protocols offered, since Envoy keys its connection pools by them.
type poolKey struct {
	addr, alpn string
}

// poolKeyOf returns the pool key of a request.
func poolKeyOf(req *http.Request) poolKey {
	k := poolKey{addr: req.URL.Host}
	if a := tlsctx.ALPNFrom(req.Context()); a != nil {
		k.alpn = a.Key
	}
	return k
}

// get returns an idle connection of pool key, or dials addr (always when fresh). An
// idle connection past the idle timeout that the sweep has not closed yet is closed.
func (p *h1Pool) get(ctx context.Context, addr string, key poolKey, fresh bool) (*h1Conn, error) {
	p.mu.Lock()
	if list := p.idle[key]; !fresh && len(list) > 0 {
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		p.idle[key] = list[:len(list)-1]
		if time.Since(pc.since) < p.idleTimeout {
			p.mu.Unlock()
			return pc, nil
		}
		// The most recently used one is too old: so are the others.
		stale := append(p.idle[key], pc)
		delete(p.idle, key)
		p.mu.Unlock()
		for _, pc := range stale {
			pc.close()
		}
	} else {
		p.mu.Unlock()
	}
	conn, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &h1Conn{pool: p, addr: key, conn: conn, br: bufio.NewReader(rawio.Reader(conn)), bw: bufio.NewWriter(rawio.Writer(conn))}
	pc.abort = func() { _ = pc.conn.SetDeadline(expired) }
	return pc, nil
}

// put returns a connection whose last response was read completely to the idle pool.
func (p *h1Pool) put(pc *h1Conn) {
	pc.reused = true
	p.mu.Lock()
	if len(p.idle[pc.addr]) >= p.maxIdle {
		p.mu.Unlock()
		pc.close()
		return
	}
	pc.since = time.Now()
	p.idle[pc.addr] = append(p.idle[pc.addr], pc)
	// A timer Reset to a time earlier than its P's next timer wakes the network poller
	// or starts a second thread (runtime.wakeNetPoller): up to once per request when each
	// connection had its own idle timer. One sweep timer per pool, set here only when
	// the pool had no idle connection, costs that at most once per idle timeout.
	if !p.sweeping {
		p.sweeping = true
		if p.sweep == nil {
			p.sweep = time.AfterFunc(p.idleTimeout, p.expire)
		} else {
			p.sweep.Reset(p.idleTimeout)
		}
	}
	p.mu.Unlock()
}

// expire is the sweep timer's function: it closes the connections idle for the idle
// timeout or longer and sets the timer for the next one to expire, if any.
func (p *h1Pool) expire() {
	now := time.Now()
	var stale []*h1Conn
	var next time.Duration // until the oldest remaining connection expires; 0: none left
	p.mu.Lock()
	for key, list := range p.idle {
		i := 0 // the list is oldest first: the expired ones are a prefix
		for ; i < len(list) && now.Sub(list[i].since) >= p.idleTimeout; i++ {
			stale = append(stale, list[i])
		}
		if i == len(list) {
			delete(p.idle, key)
			continue
		}
		if i > 0 {
			p.idle[key] = append(list[:0], list[i:]...)
			clear(list[len(list)-i:])
		}
		if d := p.idleTimeout - now.Sub(list[0].since); next == 0 || d < next {
			next = d
		}
	}
	p.sweeping = next > 0
	if p.sweeping {
		p.sweep.Reset(next)
	}
	p.mu.Unlock()
	for _, pc := range stale {
		pc.close()
	}
}

// closeIdle closes every idle connection.
func (p *h1Pool) closeIdle() {
	p.mu.Lock()
	var all []*h1Conn
	for addr, list := range p.idle {
		all = append(all, list...)
		delete(p.idle, addr)
	}
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweeping = false
	}
	p.mu.Unlock()
	for _, pc := range all {
		pc.close()
	}
}

// closeIdleTo closes the idle connections to addr.
func (p *h1Pool) closeIdleTo(addr poolKey) {
	p.mu.Lock()
	all := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	for _, pc := range all {
		pc.close()
	}
}

func (pc *h1Conn) close() { _ = pc.conn.Close() }

// expired is a deadline in the past: setting it unblocks every read and write.
var expired = time.Unix(1, 0)

// do writes req and reads its response. retry reports that nothing of a response
// arrived on a reused connection, so req may be sent again. The exchange is interrupted
// through abort when it is not nil, else when req's context ends (see Abort).
func (pc *h1Conn) do(req *http.Request, abort *Abort) (*http.Response, bool, error) {
	ctx := req.Context()
	w, armed := watchExchange(ctx, abort, pc.abort)
	fail := func(err error, retry bool) (*http.Response, bool, error) {
		w.end()
		pc.close()
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("send request: %w", ctx.Err())
		}
		return nil, retry && pc.reused, err
	}
	if !armed {
		return fail(fmt.Errorf("send request: %w", context.Canceled), false)
	}
	err := writeRequest(pc.bw, req)
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		return fail(fmt.Errorf("write request: %w", err), req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
	}
	if _, err := pc.br.Peek(1); err != nil {
		return fail(fmt.Errorf("read response: %w", err), replayable(req))
	}
	var resp *http.Response
	for {
		resp, err = h1head.ReadResponse(pc.br, req)
		if err != nil {
			return fail(fmt.Errorf("read response: %w", err), false)
		}
		// 1xx informational responses precede the final one (101 ends HTTP/1.1 on this
		// connection, which is closed after it).
		if resp.StatusCode >= 200 || resp.StatusCode < 100 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	b := &h1Body{pc: pc, body: resp.Body, watch: w,
		keep: !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, false, nil
	}
	resp.Body = b
	return resp, false, nil
}

// writeRequest writes req as HTTP/1.1, as Envoy's codec does: the header names in lower
// case, no header added but host and the body's framing (net/http's Request.Write would
// add a User-Agent of its own). The pool sends only bodies of known length (see handles).
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	_, _ = bw.WriteString(req.Method)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(req.URL.RequestURI())
	_, _ = bw.WriteString(" HTTP/1.1\r\nhost: ")
	_, _ = bw.WriteString(sanitizeField(host))
	_, _ = bw.WriteString("\r\n")
	for k, vs := range req.Header {
		if k == "Host" || k == "Content-Length" || k == "Transfer-Encoding" || k == "Connection" {
			continue
		}
		for _, v := range vs {
			writeLower(bw, k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(sanitizeField(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	switch {
	case hasBody || req.ContentLength > 0:
		_, _ = bw.WriteString("content-length: ")
		_, _ = bw.WriteString(strconv.FormatInt(req.ContentLength, 10))
		_, _ = bw.WriteString("\r\n")
	case req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch:
		_, _ = bw.WriteString("content-length: 0\r\n")
	}
	if req.Close {
		_, _ = bw.WriteString("connection: close\r\n")
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return err
	}
	if !hasBody {
		return nil
	}
	n, err := io.Copy(bw, req.Body)
	_ = req.Body.Close()
	if err == nil && n != req.ContentLength {
		err = fmt.Errorf("request body was %d bytes, content-length %d", n, req.ContentLength)
	}
	return err
}

// writeLower writes a header name in lower case, lowered straight into the writer's
// free space.
func writeLower(bw *bufio.Writer, name string) {
	b := bw.AvailableBuffer()
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	_, _ = bw.Write(b)
}

// sanitizeField replaces CR and LF in a field value, so it cannot split the head (two
// vectorized byte searches: strings.ContainsAny walks a 1 KB peer-metadata value byte
// by byte).
func sanitizeField(v string) string {
	if strings.IndexByte(v, '\r') >= 0 || strings.IndexByte(v, '\n') >= 0 {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return v
}

// replayable is http.Transport's rule for resending a request after its connection
// failed: an idempotent method, or an idempotency key, with a replayable body.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// h1Body is a response body read from a pooled connection: the connection goes back
// to the pool when the body was read to its end, and is closed when the body is closed
// early (never drained: it may be endless) or fails.
type h1Body struct {
	pc    *h1Conn
	body  io.ReadCloser
	watch watch // the exchange's cancellation; its end is false when it fired
	keep  bool  // the connection may carry another request
	done  bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
	}
	return n, err
}

func (b *h1Body) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish releases the connection once the response is over: back to the pool when ok
// and reusable, else closed.
func (b *h1Body) finish(ok bool) {
	if b.done {
		return
	}
	b.done = true
	if b.watch.end() && ok && b.keep {
		b.pc.pool.put(b.pc)
		return
	}
	b.pc.close()
}
