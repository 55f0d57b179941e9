// Package h2connect is an HTTP/2 server for CONNECT tunnels (HBONE): each stream goes to
// an http.Handler, and everything a stream sends (HEADERS, DATA, RST_STREAM,
// WINDOW_UPDATE) is written from the goroutine that produces it, under the connection's
// write lock. x/net/http2's server hands every write to its serve loop and flushes from a
// goroutine per flush, which costs a tunnel two goroutine switches per chunk; here a
// chunk is one framer write and one flush on the handler's own goroutine. The wire is
// x/net/http2's Framer and hpack.
//
// The server keeps the limits x/net's enforces (concurrent streams, header list size,
// frame size), HTTP/2 flow control both ways, SETTINGS, PING, GOAWAY from the peer,
// idle timeout and keepalive PINGs, and a graceful drain in two steps as Envoy's (GoAway
// with the largest stream id, then Shutdown with the last one processed).
package h2connect

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Defaults for the Server's zero fields (x/net/http2's server defaults).
const (
	DefaultMaxConcurrentStreams = 250
	DefaultMaxReadFrameSize     = 1 << 20
	DefaultMaxHeaderListSize    = http.DefaultMaxHeaderBytes
	DefaultConnWindow           = 1 << 20
	DefaultStreamWindow         = 1 << 20
	// MaxStreamID is HTTP/2's largest stream id, the last stream id of a drain's first
	// GOAWAY.
	MaxStreamID = 1<<31 - 1

	initialWindow  = 65535 // RFC 9113's initial window, connection and streams
	defaultFrame   = 16384 // RFC 9113's initial SETTINGS_MAX_FRAME_SIZE
	goAwayLinger   = time.Second
	maxWindowValue = 1<<31 - 1
)

var clientPreface = []byte(http2.ClientPreface)

// Server holds the settings of the connections it serves; the zero fields take the
// defaults above.
type Server struct {
	Handler              http.Handler
	MaxConcurrentStreams uint32
	MaxReadFrameSize     uint32
	MaxHeaderListSize    uint32
	ConnWindow           int32 // the receive window of each connection
	StreamWindow         int32 // the receive window of each stream
	// IdleTimeout closes a connection that had no stream for this long (0: never).
	IdleTimeout time.Duration
	// ReadIdleTimeout sends a PING once nothing was received for this long; the
	// connection closes when nothing arrives within PingTimeout after it (0: no PINGs).
	ReadIdleTimeout, PingTimeout time.Duration
}

// ErrStreamReset is what a stream's reads and writes return once the peer reset it.
var ErrStreamReset = errors.New("h2connect: stream reset by peer")

// errConnClosed is what a stream's reads and writes return once the connection ended.
var errConnClosed = errors.New("h2connect: connection closed")

// errBodyClosed is what reading a request body returns after its Close.
var errBodyClosed = errors.New("h2connect: read on closed body")

// Conn is one connection being served.
type Conn struct {
	srv    *Server
	nc     net.Conn
	tls    *tls.ConnectionState
	remote string
	ctx    context.Context
	cancel context.CancelFunc

	maxStreams   uint32
	streamWindow int32

	// wmu is the write lock: the framer's writes, the header encoder and the buffer.
	wmu  sync.Mutex
	bw   *bufio.Writer
	fr   *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer

	// mu guards what follows, and cond signals every change of a send window or of the
	// connection's or a stream's state.
	mu            sync.Mutex
	cond          *sync.Cond
	streams       map[uint32]*stream
	maxSeen       uint32 // the largest stream id the peer opened
	goAwayLast    uint32 // streams above it are refused (after Shutdown: the last processed)
	shutdown      bool   // Shutdown's GOAWAY went out: close once no stream is left
	peerGoAway    bool
	closed        bool
	sendWindow    int32 // the connection's send window
	peerInitial   int32 // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame  uint32
	recvWindow    int32 // what the peer may still send on the connection
	recvUnsent    int32 // connection window consumed and not yet given back
	idleTimer     *time.Timer
	framesRead    atomic.Uint64
	streamsServed atomic.Uint64
}

// ServeConn serves nc until it closes or ctx ends; see Conn.Serve.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) {
	s.NewConn(ctx, nc).Serve()
}

// NewConn prepares nc for Serve: the returned Conn can drain it (GoAway, Shutdown).
func (s *Server) NewConn(ctx context.Context, nc net.Conn) *Conn {
	c := &Conn{srv: s, nc: nc, remote: nc.RemoteAddr().String(), streams: map[uint32]*stream{},
		maxStreams:   orDefault(s.MaxConcurrentStreams, DefaultMaxConcurrentStreams),
		streamWindow: int32(orDefault(uint32(max(s.StreamWindow, 0)), DefaultStreamWindow)),
		goAwayLast:   MaxStreamID, sendWindow: initialWindow, peerInitial: initialWindow, peerMaxFrame: defaultFrame}
	c.recvWindow = int32(orDefault(uint32(max(s.ConnWindow, 0)), DefaultConnWindow))
	c.cond = sync.NewCond(&c.mu)
	if cs, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := cs.ConnectionState()
		c.tls = &st
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.bw = bufio.NewWriterSize(nc, 32<<10)
	c.fr = http2.NewFramer(c.bw, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = orDefault(s.MaxHeaderListSize, DefaultMaxHeaderListSize)
	c.fr.SetMaxReadFrameSize(orDefault(s.MaxReadFrameSize, DefaultMaxReadFrameSize))
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

func orDefault(v, def uint32) uint32 {
	if v == 0 {
		return def
	}
	return v
}

// Serve reads the connection's frames until it ends, each new stream served by the
// handler on a goroutine of its own. It returns once the connection is closed; handlers
// still running see their streams fail.
func (c *Conn) Serve() {
	stop := context.AfterFunc(c.ctx, func() { _ = c.nc.Close() })
	defer stop()
	defer c.close()
	if err := c.handshake(); err != nil {
		return
	}
	c.startKeepalive()
	c.armIdle()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.goAwayClose(http2.ErrCode(ce))
			} else if errors.Is(err, http2.ErrFrameTooLarge) {
				c.goAwayClose(http2.ErrCodeFrameSize)
			}
			return
		}
		c.framesRead.Add(1)
		if code, ok := c.process(f); !ok {
			c.goAwayClose(code)
			return
		}
	}
}

// handshake reads the client's preface and its SETTINGS and sends the server's.
func (c *Conn) handshake() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(c.nc, buf); err != nil || !bytes.Equal(buf, clientPreface) {
		return errors.New("h2connect: bad client preface")
	}
	c.wmu.Lock()
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.maxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.streamWindow)},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: orDefault(c.srv.MaxReadFrameSize, DefaultMaxReadFrameSize)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.fr.MaxHeaderListSize},
	)
	if err == nil && c.recvWindow > initialWindow {
		err = c.fr.WriteWindowUpdate(0, uint32(c.recvWindow-initialWindow))
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		c.goAwayClose(http2.ErrCodeProtocol)
		return errors.New("h2connect: no SETTINGS after the preface")
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	if code, ok := c.process(sf); !ok {
		c.goAwayClose(code)
		return errors.New("h2connect: bad SETTINGS")
	}
	return nil
}

// process handles one frame; ok false is a connection error with code.
func (c *Conn) process(f http2.Frame) (http2.ErrCode, bool) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.MetaHeadersFrame:
		return c.processHeaders(f)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		st := c.streams[f.StreamID]
		idle := f.StreamID > c.maxSeen
		c.mu.Unlock()
		if idle {
			return http2.ErrCodeProtocol, false
		}
		if st != nil {
			st.peerReset()
		}
	case *http2.PingFrame:
		if f.StreamID != 0 {
			return http2.ErrCodeProtocol, false
		}
		if !f.IsAck() {
			c.writeControl(func() error { return c.fr.WritePing(true, f.Data) })
		}
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.peerGoAway = true
		done := len(c.streams) == 0
		c.mu.Unlock()
		if done {
			return http2.ErrCodeNo, false
		}
	case *http2.PushPromiseFrame:
		return http2.ErrCodeProtocol, false
	}
	return 0, true
}

func (c *Conn) processSettings(f *http2.SettingsFrame) (http2.ErrCode, bool) {
	if f.IsAck() {
		return 0, true
	}
	var code http2.ErrCode
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				code = http2.ErrCode(ce)
			}
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			c.mu.Lock()
			delta := int32(s.Val) - c.peerInitial
			c.peerInitial = int32(s.Val)
			for _, st := range c.streams {
				if int64(st.sendWindow)+int64(delta) > maxWindowValue {
					c.mu.Unlock()
					code = http2.ErrCodeFlowControl
					return errors.New("window overflow")
				}
				st.sendWindow += delta
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		case http2.SettingMaxFrameSize:
			c.mu.Lock()
			c.peerMaxFrame = s.Val
			c.mu.Unlock()
		case http2.SettingHeaderTableSize:
			c.wmu.Lock()
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
			c.wmu.Unlock()
		}
		return nil
	})
	if err != nil {
		if code == 0 {
			code = http2.ErrCodeProtocol
		}
		return code, false
	}
	c.writeControl(c.fr.WriteSettingsAck)
	return 0, true
}

func (c *Conn) processWindowUpdate(f *http2.WindowUpdateFrame) (http2.ErrCode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		if f.Increment == 0 {
			return http2.ErrCodeProtocol, false
		}
		if int64(c.sendWindow)+int64(f.Increment) > maxWindowValue {
			return http2.ErrCodeFlowControl, false
		}
		c.sendWindow += int32(f.Increment)
		c.cond.Broadcast()
		return 0, true
	}
	if f.StreamID > c.maxSeen {
		return http2.ErrCodeProtocol, false
	}
	st := c.streams[f.StreamID]
	if st == nil {
		return 0, true
	}
	if f.Increment == 0 || int64(st.sendWindow)+int64(f.Increment) > maxWindowValue {
		code := http2.ErrCodeProtocol
		if f.Increment != 0 {
			code = http2.ErrCodeFlowControl
		}
		c.mu.Unlock()
		c.resetStream(f.StreamID, code)
		c.mu.Lock()
		return 0, true
	}
	st.sendWindow += int32(f.Increment)
	c.cond.Broadcast()
	return 0, true
}

func (c *Conn) processData(f *http2.DataFrame) (http2.ErrCode, bool) {
	size := int32(f.Length)
	c.mu.Lock()
	if f.StreamID > c.maxSeen {
		c.mu.Unlock()
		return http2.ErrCodeProtocol, false
	}
	if size > c.recvWindow {
		c.mu.Unlock()
		return http2.ErrCodeFlowControl, false
	}
	c.recvWindow -= size
	st := c.streams[f.StreamID]
	c.mu.Unlock()
	data := f.Data()
	if st == nil {
		// A stream already closed: its bytes go back to the connection's window at once.
		c.giveBack(nil, size)
		c.resetStream(f.StreamID, http2.ErrCodeStreamClosed)
		return 0, true
	}
	if !st.receive(data, size, f.StreamEnded()) {
		c.giveBack(nil, size)
		return 0, true
	}
	if pad := size - int32(len(data)); pad > 0 {
		c.giveBack(st, pad)
	}
	return 0, true
}

// giveBack returns n bytes of receive window to the connection and, with st, to the
// stream, sending WINDOW_UPDATEs once a quarter of a window is owed.
func (c *Conn) giveBack(st *stream, n int32) {
	var connInc, streamInc uint32
	c.mu.Lock()
	c.recvUnsent += n
	full := int32(orDefault(uint32(max(c.srv.ConnWindow, 0)), DefaultConnWindow))
	if c.recvUnsent >= full/4 && !c.closed {
		connInc = uint32(c.recvUnsent)
		c.recvWindow += c.recvUnsent
		c.recvUnsent = 0
	}
	c.mu.Unlock()
	if st != nil {
		streamInc = st.giveBack(n)
	}
	if connInc == 0 && streamInc == 0 {
		return
	}
	c.writeControl(func() error {
		if connInc > 0 {
			if err := c.fr.WriteWindowUpdate(0, connInc); err != nil {
				return err
			}
		}
		if streamInc > 0 {
			return c.fr.WriteWindowUpdate(st.id, streamInc)
		}
		return nil
	})
}

// writeControl writes a frame of the connection's own under the write lock and flushes.
func (c *Conn) writeControl(write func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if write() == nil {
		_ = c.bw.Flush()
	}
}

// resetStream sends RST_STREAM with code for id and ends the stream if it is open.
func (c *Conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st != nil {
		st.fail(ErrStreamReset, true)
	}
	c.writeControl(func() error { return c.fr.WriteRSTStream(id, code) })
}

// goAwayClose ends the connection on an error: GOAWAY with code, then close.
func (c *Conn) goAwayClose(code http2.ErrCode) {
	c.mu.Lock()
	last := c.maxSeen
	c.mu.Unlock()
	c.writeControl(func() error { return c.fr.WriteGoAway(last, code, nil) })
	_ = c.nc.Close()
}

// GoAway sends a GOAWAY (NO_ERROR) with lastStreamID and goes on serving: a drain's first
// step (Envoy's: 2^31-1, the client should open no more streams).
func (c *Conn) GoAway(lastStreamID uint32) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.fr.WriteGoAway(lastStreamID&MaxStreamID, http2.ErrCodeNo, nil); err != nil {
		return err
	}
	return c.bw.Flush()
}

// Shutdown sends the final GOAWAY with the last stream id processed: later streams are
// refused, and the connection closes once the streams in flight are done.
func (c *Conn) Shutdown() {
	c.mu.Lock()
	if c.shutdown || c.closed {
		c.mu.Unlock()
		return
	}
	c.shutdown = true
	c.goAwayLast = c.maxSeen
	last := c.maxSeen
	done := len(c.streams) == 0
	c.mu.Unlock()
	c.writeControl(func() error { return c.fr.WriteGoAway(last, http2.ErrCodeNo, nil) })
	if done {
		c.closeSoon()
	}
}

// closeSoon closes the connection a moment after its last GOAWAY, so that the peer
// reads the GOAWAY before the connection ends.
func (c *Conn) closeSoon() {
	time.AfterFunc(goAwayLinger, func() { _ = c.nc.Close() })
}

// close ends the connection and every stream still open.
func (c *Conn) close() {
	c.mu.Lock()
	c.closed = true
	sts := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		sts = append(sts, st)
	}
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, st := range sts {
		st.fail(errConnClosed, false)
	}
	c.cancel()
	_ = c.nc.Close()
}

// armIdle starts the idle timer when no stream is open (call with c.mu not held).
func (c *Conn) armIdle() {
	if c.srv.IdleTimeout <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) > 0 || c.closed {
		return
	}
	served := c.streamsServed.Load()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.idleTimer = time.AfterFunc(c.srv.IdleTimeout, func() {
		c.mu.Lock()
		idle := len(c.streams) == 0 && c.streamsServed.Load() == served
		c.mu.Unlock()
		if idle {
			c.Shutdown()
		}
	})
}

// startKeepalive sends a PING once nothing was read for ReadIdleTimeout and closes the
// connection when nothing is read within PingTimeout after it.
func (c *Conn) startKeepalive() {
	every := c.srv.ReadIdleTimeout
	if every <= 0 {
		return
	}
	wait := c.srv.PingTimeout
	if wait <= 0 {
		wait = 15 * time.Second
	}
	go func() {
		t := time.NewTimer(every)
		defer t.Stop()
		seen := c.framesRead.Load()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
			if n := c.framesRead.Load(); n != seen {
				seen = n
				t.Reset(every)
				continue
			}
			c.writeControl(func() error { return c.fr.WritePing(false, [8]byte{'m', 'e', 's', 'h', 'l', 'a', 'b'}) })
			t.Reset(wait)
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
			if c.framesRead.Load() == seen {
				_ = c.nc.Close()
				return
			}
			seen = c.framesRead.Load()
			t.Reset(every)
		}
	}()
}

// processHeaders opens a stream (or ends a request body with trailers).
func (c *Conn) processHeaders(f *http2.MetaHeadersFrame) (http2.ErrCode, bool) {
	id := f.StreamID
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		c.mu.Unlock()
		if !f.StreamEnded() {
			c.resetStream(id, http2.ErrCodeProtocol) // trailers must end the stream
			return 0, true
		}
		st.receive(nil, 0, true)
		return 0, true
	}
	if id%2 == 0 || id <= c.maxSeen {
		c.mu.Unlock()
		return http2.ErrCodeProtocol, false
	}
	c.maxSeen = id
	refuse := id > c.goAwayLast || c.closed || uint32(len(c.streams)) >= c.maxStreams
	c.mu.Unlock()
	if refuse {
		c.writeControl(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
		return 0, true
	}
	if f.Truncated {
		c.writeControl(func() error {
			return c.writeHeaderBlock(id, http.StatusRequestHeaderFieldsTooLarge, nil, true)
		})
		if !f.StreamEnded() {
			c.writeControl(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeNo) })
		}
		return 0, true
	}
	req, err := c.newRequest(f)
	if err != nil {
		c.writeControl(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeProtocol) })
		return 0, true
	}
	st := c.newStream(id, req, f.StreamEnded())
	c.streamsServed.Add(1)
	go st.serve()
	return 0, true
}

// newRequest makes the http.Request of a stream's request headers.
func (c *Conn) newRequest(f *http2.MetaHeadersFrame) (*http.Request, error) {
	method, authority := f.PseudoValue("method"), f.PseudoValue("authority")
	path, scheme, protocol := f.PseudoValue("path"), f.PseudoValue("scheme"), f.PseudoValue("protocol")
	req := &http.Request{Method: method, Proto: "HTTP/2.0", ProtoMajor: 2, Host: authority,
		Header: make(http.Header, len(f.Fields)), RemoteAddr: c.remote, TLS: c.tls, ContentLength: -1}
	switch {
	case method == "":
		return nil, errors.New("no :method")
	case method == http.MethodConnect && protocol == "":
		// Classic CONNECT (HBONE's): :authority only.
		if authority == "" || path != "" || scheme != "" {
			return nil, errors.New("malformed CONNECT")
		}
		req.URL = &url.URL{Host: authority}
		req.RequestURI = authority
	default:
		if path == "" || scheme == "" {
			return nil, errors.New("no :path or :scheme")
		}
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return nil, err
		}
		u.Scheme, u.Host = scheme, authority
		req.URL = u
		req.RequestURI = path
		if protocol != "" {
			req.Header[":protocol"] = []string{protocol}
		}
	}
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			return nil, errors.New("connection-specific header " + hf.Name)
		case "te":
			if hf.Value != "trailers" {
				return nil, errors.New("te other than trailers")
			}
		case "host":
			if req.Host == "" {
				req.Host = hf.Value
			}
		case "content-length":
			if n, err := strconv.ParseInt(hf.Value, 10, 64); err == nil {
				req.ContentLength = n
			}
		}
		k := http.CanonicalHeaderKey(hf.Name)
		req.Header[k] = append(req.Header[k], hf.Value)
	}
	if f.StreamEnded() {
		req.ContentLength = 0
	}
	return req, nil
}

// writeHeaderBlock writes a HEADERS frame (and CONTINUATIONs) with status and h; call
// with c.wmu held.
func (c *Conn) writeHeaderBlock(id uint32, status int, h http.Header, end bool) error {
	c.hbuf.Reset()
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	if _, ok := h["Date"]; !ok && status >= 200 {
		// As x/net's server (and Envoy): a final response carries a date unless the
		// handler set one (or removed it with a nil value).
		_ = c.henc.WriteField(hpack.HeaderField{Name: "date", Value: time.Now().UTC().Format(http.TimeFormat)})
	}
	for k, vs := range h {
		lk := strings.ToLower(k)
		switch lk {
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			continue
		}
		if !validHeaderName(lk) {
			continue
		}
		for _, v := range vs {
			_ = c.henc.WriteField(hpack.HeaderField{Name: lk, Value: v})
		}
	}
	c.mu.Lock()
	frame := int(c.peerMaxFrame)
	c.mu.Unlock()
	block := c.hbuf.Bytes()
	first := block[:min(len(block), frame)]
	block = block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: end, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		n := min(len(block), frame)
		if err := c.fr.WriteContinuation(id, n == len(block), block[:n]); err != nil {
			return err
		}
		block = block[n:]
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		b := k[i]
		if b <= ' ' || b >= 0x7f || b == ':' {
			return false
		}
	}
	return true
}
