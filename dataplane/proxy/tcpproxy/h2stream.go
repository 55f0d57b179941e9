package tcpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2 windows of a tunnel's connection, as ztunnel sizes its own (a 4 MiB stream window,
// 16 MiB for the connection): the receiver's, advertised in SETTINGS and a first
// WINDOW_UPDATE, and given back once a quarter of it was read.
const (
	h2StreamWindow = 4 << 20
	h2ConnWindow   = 16 << 20
	h2InitialConn  = 65535 // RFC 9113's initial connection window, before any update
	h2DefaultFrame = 16384 // SETTINGS_MAX_FRAME_SIZE until the peer says otherwise
	tunnelStream   = 1     // the one stream of the connection
)

// h2Stream is tunneling_config's HTTP/2 client: one CONNECT stream on a connection of its
// own (Envoy's tunnel also opens a connection per downstream connection through its
// pool), without x/net/http2's ClientConn. That client hands every write to a per-stream
// goroutine and every read from a connection goroutine, so each request through a
// waypoint's connect_originate woke two more goroutines. Here Write sends DATA on the
// caller's goroutine and Read reads frames on its own; a writer waiting for send window
// while nobody reads reads the frames itself.
type h2Stream struct {
	conn net.Conn
	fr   *http2.Framer
	bw   *bufio.Writer

	wser    sync.Mutex // one Write or CloseWrite at a time: DATA stays in order
	wmu     sync.Mutex // frame writes, and bw; never held while waiting for window
	wclosed bool       // END_STREAM sent or the stream reset (under wmu)

	mu         sync.Mutex
	cond       *sync.Cond // send window grown, a reader gone, an error
	reading    bool       // a goroutine is reading frames (Read, or a writer needing window)
	sendConn   int64      // send windows
	sendStream int64
	peerFrame  int    // the peer's SETTINGS_MAX_FRAME_SIZE
	initWindow int64  // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	buf        []byte // DATA read; buf[off:] not yet returned
	off        int
	ended      bool  // the peer's END_STREAM was read
	err        error // the stream failed (reset, GOAWAY, connection error)
	unacked    int64 // DATA bytes (with padding) read since the last WINDOW_UPDATE
	status     int   // the response's :status, once read
	closeOnce  sync.Once
}

// errStreamClosed is a write after CloseWrite or Close.
var errStreamClosed = errors.New("tunnel stream closed")

// openH2Stream sends the connection preface, SETTINGS, the connection window and the
// CONNECT's HEADERS in one write, then reads until the response's headers arrive.
func openH2Stream(conn net.Conn, authority string, header http.Header) (*h2Stream, int, error) {
	s := &h2Stream{conn: conn, bw: bufio.NewWriterSize(conn, 32<<10),
		sendConn: h2InitialConn, sendStream: 65535, initWindow: 65535, peerFrame: h2DefaultFrame}
	s.cond = sync.NewCond(&s.mu)
	s.fr = http2.NewFramer(s.bw, bufio.NewReaderSize(conn, 32<<10))
	s.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	_ = enc.WriteField(hpack.HeaderField{Name: ":method", Value: http.MethodConnect})
	_ = enc.WriteField(hpack.HeaderField{Name: ":authority", Value: authority})
	for k, vs := range header {
		name := strings.ToLower(k)
		for _, v := range vs {
			_ = enc.WriteField(hpack.HeaderField{Name: name, Value: v})
		}
	}
	s.wmu.Lock()
	_, _ = s.bw.WriteString(http2.ClientPreface)
	_ = s.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow})
	_ = s.fr.WriteWindowUpdate(0, h2ConnWindow-h2InitialConn)
	err := s.writeHeaders(hb.Bytes())
	if err == nil {
		err = s.bw.Flush()
	}
	s.wmu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	s.reading = true
	for s.status == 0 && s.err == nil {
		s.mu.Unlock()
		s.readFrame()
		s.mu.Lock()
	}
	s.reading = false
	status, err := s.status, s.err
	s.mu.Unlock()
	if status == 0 {
		return nil, 0, err
	}
	return s, status, nil
}

// writeHeaders writes a header block as HEADERS and the CONTINUATION frames it needs.
func (s *h2Stream) writeHeaders(block []byte) error {
	first := true
	for first || len(block) > 0 {
		chunk := block
		if len(chunk) > h2DefaultFrame {
			chunk = chunk[:h2DefaultFrame]
		}
		block = block[len(chunk):]
		var err error
		if first {
			err = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: tunnelStream, BlockFragment: chunk, EndHeaders: len(block) == 0})
		} else {
			err = s.fr.WriteContinuation(tunnelStream, len(block) == 0, chunk)
		}
		if err != nil {
			return err
		}
		first = false
	}
	return nil
}

// fail records the stream's first error and wakes any waiting writer.
func (s *h2Stream) fail(err error) {
	if s.err == nil {
		s.err = err
	}
	s.cond.Broadcast()
}

// readFrame reads one frame and acts on it; called by the one goroutine that is reading
// (s.reading), without s.mu. Control frames are answered here (SETTINGS and PING acks).
func (s *h2Stream) readFrame() {
	f, err := s.fr.ReadFrame()
	if err != nil {
		s.mu.Lock()
		if errors.Is(err, io.EOF) && s.ended {
			err = io.EOF
		} else if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		s.fail(err)
		s.mu.Unlock()
		return
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		s.onData(f)
	case *http2.MetaHeadersFrame:
		s.mu.Lock()
		defer s.mu.Unlock()
		if f.StreamID != tunnelStream {
			s.fail(fmt.Errorf("tunnel: HEADERS on stream %d", f.StreamID))
			return
		}
		if s.status == 0 {
			st, err := strconv.Atoi(f.PseudoValue("status"))
			if err != nil || st < 100 {
				s.fail(fmt.Errorf("tunnel: bad :status %q", f.PseudoValue("status")))
				return
			}
			if st < 200 { // 1xx: the final answer follows
				return
			}
			s.status = st
		}
		if f.StreamEnded() { // trailers, or a response with no body
			s.ended = true
			s.cond.Broadcast()
		}
	case *http2.SettingsFrame:
		if f.IsAck() {
			return
		}
		s.mu.Lock()
		err := f.ForeachSetting(func(st http2.Setting) error {
			switch st.ID {
			case http2.SettingInitialWindowSize:
				s.sendStream += int64(st.Val) - s.initWindow
				s.initWindow = int64(st.Val)
			case http2.SettingMaxFrameSize:
				s.peerFrame = int(st.Val)
			}
			return nil
		})
		s.cond.Broadcast()
		s.mu.Unlock()
		if err == nil {
			s.control(func() error { return s.fr.WriteSettingsAck() })
		}
	case *http2.WindowUpdateFrame:
		s.mu.Lock()
		switch f.StreamID {
		case 0:
			s.sendConn += int64(f.Increment)
		case tunnelStream:
			s.sendStream += int64(f.Increment)
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			s.control(func() error { return s.fr.WritePing(true, data) })
		}
	case *http2.RSTStreamFrame:
		if f.StreamID == tunnelStream {
			s.mu.Lock()
			s.fail(fmt.Errorf("tunnel: stream reset by peer: %v", f.ErrCode))
			s.mu.Unlock()
		}
	case *http2.GoAwayFrame:
		if f.LastStreamID < tunnelStream {
			s.mu.Lock()
			s.fail(fmt.Errorf("tunnel: GOAWAY before the stream: %v", f.ErrCode))
			s.mu.Unlock()
		}
	}
}

// onData keeps a DATA frame's bytes for Read and gives the window back once a quarter of
// it was taken.
func (s *h2Stream) onData(f *http2.DataFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.StreamID != tunnelStream {
		s.fail(fmt.Errorf("tunnel: DATA on stream %d", f.StreamID))
		return
	}
	if s.off == len(s.buf) {
		s.buf, s.off = s.buf[:0], 0
	}
	s.buf = append(s.buf, f.Data()...)
	if f.StreamEnded() {
		s.ended = true
		s.cond.Broadcast()
	}
	s.unacked += int64(f.Header().Length)
	if s.unacked >= h2StreamWindow/4 {
		n := uint32(s.unacked)
		s.unacked = 0
		s.mu.Unlock()
		s.control(func() error {
			if err := s.fr.WriteWindowUpdate(0, n); err != nil {
				return err
			}
			return s.fr.WriteWindowUpdate(tunnelStream, n)
		})
		s.mu.Lock()
	}
}

// control writes a control frame at once (under wmu: it waits for a write under way).
func (s *h2Stream) control(write func() error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := write(); err == nil {
		_ = s.bw.Flush()
	}
}

// Read returns the response's DATA; io.EOF once the peer ended the stream.
func (s *h2Stream) Read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.off == len(s.buf) && !s.ended && s.err == nil {
		if s.reading { // a writer is reading for its window: it keeps any DATA for us
			s.cond.Wait()
			continue
		}
		s.reading = true
		s.mu.Unlock()
		s.readFrame()
		s.mu.Lock()
		s.reading = false
		s.cond.Broadcast()
	}
	if s.off < len(s.buf) {
		n := copy(b, s.buf[s.off:])
		s.off += n
		return n, nil
	}
	if s.ended {
		return 0, io.EOF
	}
	return 0, s.err
}

// Write sends b as DATA frames within the peer's windows and frame size, flushed once
// the window allows no more or b is sent.
func (s *h2Stream) Write(b []byte) (int, error) {
	s.wser.Lock()
	defer s.wser.Unlock()
	written := 0
	for len(b) > 0 {
		n, err := s.window(len(b))
		if err != nil {
			return written, err
		}
		s.wmu.Lock()
		if s.wclosed {
			s.wmu.Unlock()
			return written, errStreamClosed
		}
		err = s.fr.WriteData(tunnelStream, false, b[:n])
		if err == nil {
			err = s.bw.Flush()
		}
		s.wmu.Unlock()
		if err != nil {
			return written, err
		}
		b = b[n:]
		written += n
	}
	return written, nil
}

// window takes up to want bytes of send window (and at most a frame), waiting for the
// peer's WINDOW_UPDATE when there is none: read by the reader, or by this writer when
// nobody is reading.
func (s *h2Stream) window(want int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.err != nil {
			return 0, s.err
		}
		n := int64(min(want, s.peerFrame))
		n = min(n, s.sendConn, s.sendStream)
		if n > 0 {
			s.sendConn -= n
			s.sendStream -= n
			return int(n), nil
		}
		if s.reading {
			s.cond.Wait()
			continue
		}
		s.reading = true
		s.mu.Unlock()
		s.readFrame()
		s.mu.Lock()
		s.reading = false
		s.cond.Broadcast()
	}
}

// CloseWrite ends the request stream (END_STREAM): the peer's half-close.
func (s *h2Stream) CloseWrite() error {
	s.wser.Lock()
	defer s.wser.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return nil
	}
	s.wclosed = true
	if err := s.fr.WriteData(tunnelStream, true, nil); err != nil {
		return err
	}
	return s.bw.Flush()
}

// Close resets the stream unless both sides ended it, then closes the connection.
func (s *h2Stream) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		done := s.ended
		s.fail(net.ErrClosed)
		s.mu.Unlock()
		if s.wmu.TryLock() { // a writer stuck on a full socket does not hold Close up
			if !s.wclosed || !done {
				s.wclosed = true
				if s.fr.WriteRSTStream(tunnelStream, http2.ErrCodeCancel) == nil {
					_ = s.bw.Flush()
				}
			}
			s.wmu.Unlock()
		}
		_ = s.conn.Close()
	})
	return nil
}
