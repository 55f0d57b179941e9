package h2connect

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// stream is one request: its body (what the peer sends) and the http.ResponseWriter its
// handler answers through, which writes on the handler's goroutine.
type stream struct {
	c      *Conn
	id     uint32
	req    *http.Request
	ctx    context.Context
	cancel context.CancelFunc

	// The receive side, under rmu: the bytes received and not yet read, the error reads
	// return once they are (io.EOF after END_STREAM), the receive window.
	rmu         sync.Mutex
	rcond       *sync.Cond
	buf         []byte
	off         int
	rerr        error
	remoteEnded bool
	bodyClosed  bool
	recvWindow  int32
	recvUnsent  int32

	// The send side, under c.mu.
	sendWindow int32
	failed     error // set once the stream is reset or its connection closed
	deadline   time.Time
	dlTimer    *time.Timer

	// The handler's: the response as http.ResponseWriter.
	header      http.Header
	status      int  // set by WriteHeader
	wroteHeader bool // the HEADERS frame went out
	ended       bool // END_STREAM went out
}

func (c *Conn) newStream(id uint32, req *http.Request, ended bool) *stream {
	ctx, cancel := context.WithCancel(c.ctx)
	st := &stream{c: c, id: id, ctx: ctx, cancel: cancel, remoteEnded: ended, recvWindow: c.streamWindow,
		header: http.Header{}}
	st.rcond = sync.NewCond(&st.rmu)
	if ended {
		st.rerr = io.EOF
		req.Body = http.NoBody
	} else {
		req.Body = &body{st: st}
	}
	st.req = req.WithContext(ctx)
	c.mu.Lock()
	st.sendWindow = c.peerInitial
	c.streams[id] = st
	c.mu.Unlock()
	return st
}

// serve runs the handler, then ends the stream: the response's end if the handler did
// not write it, and RST_STREAM NO_ERROR when the peer has not ended its side (as x/net's
// server, RFC 9113 8.1: the response is complete, the rest of the request is not wanted).
func (st *stream) serve() {
	defer st.finish()
	defer func() {
		if p := recover(); p != nil {
			st.c.resetStream(st.id, http2.ErrCodeInternal)
			if err, ok := p.(error); !ok || !errors.Is(err, http.ErrAbortHandler) {
				panic(p)
			}
		}
	}()
	st.c.srv.Handler.ServeHTTP(st, st.req)
}

func (st *stream) finish() {
	c := st.c
	st.cancel()
	st.rmu.Lock()
	remoteEnded := st.remoteEnded
	st.rmu.Unlock()
	c.mu.Lock()
	failed := st.failed != nil
	if st.dlTimer != nil {
		st.dlTimer.Stop()
	}
	c.mu.Unlock()
	if !failed {
		c.wmu.Lock()
		var err error
		switch {
		case !st.wroteHeader:
			err = st.writeHeaders(true)
		case !st.ended:
			err = c.fr.WriteData(st.id, true, nil)
		}
		if err == nil && !remoteEnded {
			err = c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		}
		if err == nil {
			err = c.bw.Flush()
		}
		c.wmu.Unlock()
		if err != nil {
			_ = c.nc.Close()
		}
	}
	st.ended = true
	if n := st.dropBody(errBodyClosed); n > 0 {
		c.giveBack(nil, n)
	}
	c.mu.Lock()
	delete(c.streams, st.id)
	left := len(c.streams)
	shutdown, peerGoAway := c.shutdown, c.peerGoAway
	c.cond.Broadcast()
	c.mu.Unlock()
	switch {
	case left > 0:
	case shutdown:
		c.closeSoon()
	case peerGoAway:
		_ = c.nc.Close()
	default:
		c.armIdle()
	}
}

// receive queues DATA the peer sent (size counts its padding); false: the stream does
// not take it (its body is closed or it is reset), and the bytes go back to the
// connection's window.
func (st *stream) receive(data []byte, size int32, end bool) bool {
	st.rmu.Lock()
	if st.remoteEnded {
		st.rmu.Unlock()
		st.c.resetStream(st.id, http2.ErrCodeStreamClosed)
		return false
	}
	if size > st.recvWindow {
		st.rmu.Unlock()
		st.c.resetStream(st.id, http2.ErrCodeFlowControl)
		return false
	}
	st.recvWindow -= size
	if end {
		st.remoteEnded = true
	}
	if st.bodyClosed || (st.rerr != nil && !errors.Is(st.rerr, io.EOF)) {
		st.rmu.Unlock()
		return false
	}
	if len(data) > 0 {
		if st.off == len(st.buf) {
			st.buf, st.off = st.buf[:0], 0
		}
		st.buf = append(st.buf, data...)
	}
	if end && st.rerr == nil {
		st.rerr = io.EOF
	}
	st.rcond.Broadcast()
	st.rmu.Unlock()
	return true
}

// giveBack returns n read bytes to the stream's receive window; it returns the
// WINDOW_UPDATE increment to send, 0 while less than a quarter of the window is owed.
func (st *stream) giveBack(n int32) uint32 {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	if st.remoteEnded || st.rerr != nil {
		return 0
	}
	st.recvUnsent += n
	if st.recvUnsent < st.c.streamWindow/4 {
		return 0
	}
	inc := st.recvUnsent
	st.recvWindow += inc
	st.recvUnsent = 0
	return uint32(inc)
}

// dropBody ends the body's reads with err and drops what was not read, returning its
// size (owed back to the connection's window).
func (st *stream) dropBody(err error) int32 {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	n := int32(len(st.buf) - st.off)
	st.buf, st.off = nil, 0
	if st.rerr == nil || errors.Is(st.rerr, io.EOF) || !errors.Is(err, errBodyClosed) {
		st.rerr = err
	}
	st.bodyClosed = true
	st.rcond.Broadcast()
	return n
}

// fail ends the stream on a reset or a closed connection: reads and writes fail with
// err, the context ends.
func (st *stream) fail(err error, dropBody bool) {
	c := st.c
	c.mu.Lock()
	if st.failed == nil {
		st.failed = err
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	st.rmu.Lock()
	if st.rerr == nil || errors.Is(st.rerr, io.EOF) {
		st.rerr = err
	}
	var n int32
	if dropBody {
		n = int32(len(st.buf) - st.off)
		st.buf, st.off = nil, 0
	}
	st.rcond.Broadcast()
	st.rmu.Unlock()
	if n > 0 {
		c.giveBack(nil, n)
	}
	st.cancel()
}

func (st *stream) peerReset() { st.fail(ErrStreamReset, true) }

// body is a stream's request body.
type body struct{ st *stream }

func (b *body) Read(p []byte) (int, error) {
	st := b.st
	st.rmu.Lock()
	for st.off == len(st.buf) && st.rerr == nil {
		st.rcond.Wait()
	}
	if st.off == len(st.buf) {
		err := st.rerr
		st.rmu.Unlock()
		return 0, err
	}
	n := copy(p, st.buf[st.off:])
	st.off += n
	st.rmu.Unlock()
	st.c.giveBack(st, int32(n))
	return n, nil
}

func (b *body) Close() error {
	if n := b.st.dropBody(errBodyClosed); n > 0 {
		b.st.c.giveBack(nil, n)
	}
	return nil
}

// Header is the response's header, sent with its HEADERS frame.
func (st *stream) Header() http.Header { return st.header }

// WriteHeader sets the response's status; the HEADERS go out with the first Write or
// Flush, or when the handler returns (then with END_STREAM). A 1xx goes out at once.
func (st *stream) WriteHeader(code int) {
	if st.wroteHeader || st.status != 0 {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		st.c.wmu.Lock()
		err := st.c.writeHeaderBlock(st.id, code, nil, false)
		if err == nil {
			err = st.c.bw.Flush()
		}
		st.c.wmu.Unlock()
		if err != nil {
			_ = st.c.nc.Close()
		}
		return
	}
	st.status = code
}

// writeHeaders writes the response's HEADERS; call with c.wmu held.
func (st *stream) writeHeaders(end bool) error {
	if st.status == 0 {
		st.status = http.StatusOK
	}
	st.wroteHeader = true
	st.ended = end
	return st.c.writeHeaderBlock(st.id, st.status, st.header, end)
}

// Write sends p as DATA, as much at a time as the send windows allow, each part
// flushed to the connection before the next wait.
func (st *stream) Write(p []byte) (int, error) {
	c := st.c
	if st.ended {
		return 0, http.ErrBodyNotAllowed
	}
	if !st.wroteHeader {
		if err := st.sendHeaders(); err != nil {
			return 0, err
		}
	}
	written := 0
	for len(p) > 0 {
		n, frame, err := st.reserve(len(p))
		if err != nil {
			return written, err
		}
		c.wmu.Lock()
		for off := 0; off < n && err == nil; off += frame {
			err = c.fr.WriteData(st.id, false, p[off:min(n, off+frame)])
		}
		if err == nil {
			err = c.bw.Flush()
		}
		c.wmu.Unlock()
		if err != nil {
			_ = c.nc.Close()
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// reserve waits until the stream's and the connection's send windows have room and
// takes up to want bytes of it; frame is the largest DATA frame the peer takes.
func (st *stream) reserve(want int) (n, frame int, err error) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case st.failed != nil:
			return 0, 0, st.failed
		case c.closed:
			return 0, 0, errConnClosed
		case !st.deadline.IsZero() && !time.Now().Before(st.deadline):
			c.mu.Unlock()
			c.resetStream(st.id, http2.ErrCodeCancel)
			c.mu.Lock()
			return 0, 0, os.ErrDeadlineExceeded
		}
		if avail := min(st.sendWindow, c.sendWindow); avail > 0 {
			n = min(want, int(avail))
			st.sendWindow -= int32(n)
			c.sendWindow -= int32(n)
			return n, int(c.peerMaxFrame), nil
		}
		c.cond.Wait()
	}
}

// sendHeaders writes the HEADERS, which have not gone out yet.
func (st *stream) sendHeaders() error {
	c := st.c
	c.mu.Lock()
	failed := st.failed
	c.mu.Unlock()
	if failed != nil {
		return failed
	}
	c.wmu.Lock()
	err := st.writeHeaders(false)
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		_ = c.nc.Close()
	}
	return err
}

// FlushError sends the HEADERS if they are still pending; DATA is never held back.
func (st *stream) FlushError() error {
	if st.wroteHeader {
		return nil
	}
	return st.sendHeaders()
}

// Flush is FlushError for http.Flusher.
func (st *stream) Flush() { _ = st.FlushError() }

// SetWriteDeadline bounds the wait for send window; a write that misses it resets the
// stream (CANCEL), as x/net's server does.
func (st *stream) SetWriteDeadline(t time.Time) error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st.deadline = t
	if st.dlTimer != nil {
		st.dlTimer.Stop()
		st.dlTimer = nil
	}
	if !t.IsZero() {
		st.dlTimer = time.AfterFunc(time.Until(t), func() {
			c.mu.Lock()
			c.cond.Broadcast()
			c.mu.Unlock()
		})
	}
	return nil
}
