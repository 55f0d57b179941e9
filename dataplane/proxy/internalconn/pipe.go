package internalconn

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// BufferSize is how many bytes one direction of an internal connection holds that its
// reader has not read yet: Envoy's internal listener buffer (buffer_size_kb's default,
// 1024 KiB). A write returns once its bytes are in the buffer; it waits only while the
// buffer is full.
const BufferSize = 1 << 20

// keepBuffer is the largest buffer a drained direction keeps for its next writes; a
// larger one (a burst) is dropped so that an idle connection holds little memory.
const keepBuffer = 64 << 10

// pipe returns the two ends of an in-memory connection: one buffered direction each
// way, so either end can end its direction (CloseWrite) and keep reading the other, and
// a writer does not wait for its reader (as Envoy's internal connections, which are
// buffers between the two ends, not a hand-over of each write). That spares a goroutine
// switch per write, and several writes reach the reader in one read.
func pipe() (net.Conn, net.Conn) {
	aToB, bToA := newDirection(), newDirection()
	return &pipeEnd{in: bToA, out: aToB}, &pipeEnd{in: aToB, out: bToA}
}

// direction is one way of a pipe: bytes written and not read yet, and how each end
// ended it.
type direction struct {
	mu      sync.Mutex
	data    []byte // the unread bytes are data[off:]
	off     int
	ended   bool // the writer closed it: the reader reads EOF once buf is drained
	dropped bool // the reader closed it: writes fail, buffered bytes are gone
	// readable and writable wake a waiting reader or writer (capacity 1: a signal is
	// never lost, a spurious one is harmless).
	readable, writable chan struct{}
	readDL, writeDL    deadline
}

func newDirection() *direction {
	return &direction{readable: make(chan struct{}, 1), writable: make(chan struct{}, 1),
		readDL: newDeadline(), writeDL: newDeadline()}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (d *direction) read(b []byte) (int, error) {
	for {
		if d.readDL.passed() { // as a socket: a passed deadline fails the call first
			return 0, os.ErrDeadlineExceeded
		}
		d.mu.Lock()
		switch {
		case d.dropped:
			d.mu.Unlock()
			return 0, io.ErrClosedPipe
		case d.off < len(d.data):
			n := copy(b, d.data[d.off:])
			d.off += n
			if d.off == len(d.data) { // drained: the buffer starts over
				d.off, d.data = 0, d.data[:0]
				if cap(d.data) > keepBuffer {
					d.data = nil
				}
			}
			d.mu.Unlock()
			signal(d.writable)
			return n, nil
		case d.ended:
			d.mu.Unlock()
			return 0, io.EOF
		case len(b) == 0:
			d.mu.Unlock()
			return 0, nil
		}
		d.mu.Unlock()
		select {
		case <-d.readable:
		case <-d.readDL.expired():
			if d.readDL.passed() {
				return 0, os.ErrDeadlineExceeded
			}
		}
	}
}

func (d *direction) write(b []byte) (int, error) {
	written := 0
	for {
		if d.writeDL.passed() {
			return written, os.ErrDeadlineExceeded
		}
		d.mu.Lock()
		if d.ended || d.dropped {
			d.mu.Unlock()
			return written, io.ErrClosedPipe
		}
		if room := BufferSize - (len(d.data) - d.off); room > 0 {
			n := min(room, len(b)-written)
			if d.off > 0 && len(d.data)+n > cap(d.data) { // move the unread bytes to the front
				d.data = d.data[:copy(d.data, d.data[d.off:])]
				d.off = 0
			}
			d.data = append(d.data, b[written:written+n]...)
			written += n
			d.mu.Unlock()
			signal(d.readable)
			if written == len(b) {
				return written, nil
			}
			continue
		}
		d.mu.Unlock()
		select {
		case <-d.writable:
		case <-d.writeDL.expired():
			if d.writeDL.passed() {
				return written, os.ErrDeadlineExceeded
			}
		}
	}
}

// end is the writer's end of the direction (EOF after what is buffered).
func (d *direction) end() {
	d.mu.Lock()
	d.ended = true
	d.mu.Unlock()
	signal(d.readable)
	signal(d.writable)
}

// drop is the reader's close: what is buffered is discarded and writes fail.
func (d *direction) drop() {
	d.mu.Lock()
	d.dropped, d.data, d.off = true, nil, 0
	d.mu.Unlock()
	signal(d.readable)
	signal(d.writable)
}

// pipeEnd is one end of pipe: it reads in and writes out.
type pipeEnd struct {
	in, out *direction
	once    sync.Once
}

// Read reads the peer's direction: io.EOF once the peer ended it (CloseWrite or Close)
// and everything it wrote before was read.
func (c *pipeEnd) Read(b []byte) (int, error) { return c.in.read(b) }

func (c *pipeEnd) Write(b []byte) (int, error) { return c.out.write(b) }

// CloseWrite ends this end's direction.
func (c *pipeEnd) CloseWrite() error {
	c.out.end()
	return nil
}

// Close ends this end's direction and drops the peer's: the peer reads what this end
// wrote, then EOF; its writes fail.
func (c *pipeEnd) Close() error {
	c.once.Do(func() {
		c.out.end()
		c.in.drop()
	})
	return nil
}

// LocalAddr and RemoteAddr are replaced by Conn's.
func (c *pipeEnd) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *pipeEnd) RemoteAddr() net.Addr { return pipeAddr{} }

func (c *pipeEnd) SetDeadline(t time.Time) error {
	c.in.readDL.set(t)
	c.out.writeDL.set(t)
	return nil
}

func (c *pipeEnd) SetReadDeadline(t time.Time) error {
	c.in.readDL.set(t)
	return nil
}

func (c *pipeEnd) SetWriteDeadline(t time.Time) error {
	c.out.writeDL.set(t)
	return nil
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return Network }
func (pipeAddr) String() string  { return Network }

// deadline is a read or write deadline: expired's channel is closed once it passed.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline passed
}

func newDeadline() deadline { return deadline{cancel: make(chan struct{})} }

// set sets the deadline to t; the zero time clears it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer closed it (or is about to): wait for that
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if wait := time.Until(t); wait > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(wait, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// expired returns a channel closed once the deadline passed.
func (d *deadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

// passed reports whether the deadline passed (a wake-up from expired's channel may come
// from a deadline that was moved since).
func (d *deadline) passed() bool { return isClosed(d.expired()) }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ReadAhead reads a stream that has no deadlines of its own (a CONNECT stream's request
// body) ahead into a buffer, on a goroutine of its own, so that its reader can have the
// deadlines of a socket: a read deadline interrupts a waiting Read, and a later Read goes
// on with the stream. Reading ahead starts with the first Read and goes on until the
// stream ends or Close.
type ReadAhead struct {
	d             *direction
	src           io.ReadCloser
	started, once sync.Once
}

// NewReadAhead returns a reader of src that reads ahead once read.
func NewReadAhead(src io.ReadCloser) *ReadAhead {
	return &ReadAhead{d: newDirection(), src: src}
}

// readAheadBufs are the read-ahead goroutines' read buffers.
var readAheadBufs = sync.Pool{New: func() any { return new([16 << 10]byte) }}

func (ra *ReadAhead) pump() {
	bp := readAheadBufs.Get().(*[16 << 10]byte)
	defer readAheadBufs.Put(bp)
	for {
		n, err := ra.src.Read(bp[:])
		if n > 0 {
			if _, werr := ra.d.write(bp[:n]); werr != nil {
				return // closed
			}
		}
		if err != nil {
			ra.d.end() // the stream's end or its reset: the reader reads EOF
			return
		}
	}
}

// Read reads what the stream sent: io.EOF once it ended and everything was read.
func (ra *ReadAhead) Read(b []byte) (int, error) {
	ra.started.Do(func() { go ra.pump() })
	return ra.d.read(b)
}

// SetReadDeadline sets the deadline of Read.
func (ra *ReadAhead) SetReadDeadline(t time.Time) error {
	ra.d.readDL.set(t)
	return nil
}

// Close closes the stream and drops what was read ahead: Read fails after it.
func (ra *ReadAhead) Close() error {
	ra.once.Do(func() {
		_ = ra.src.Close()
		ra.d.drop()
	})
	return nil
}

// Pipe is a buffered in-memory byte stream with io.Pipe's ends: a write returns once its
// bytes are in the buffer, instead of waiting for the reader to take them (a CONNECT
// tunnel's request body, which the HTTP/2 client reads on a goroutine of its own).
func Pipe() (*PipeReader, *PipeWriter) {
	d := newDirection()
	return &PipeReader{d: d}, &PipeWriter{d: d}
}

// PipeReader is Pipe's reading end.
type PipeReader struct{ d *direction }

// Read reads what was written: io.EOF once the writer closed and everything was read,
// io.ErrClosedPipe once the writer aborted (CloseWithError) or the reader closed.
func (r *PipeReader) Read(b []byte) (int, error) { return r.d.read(b) }

// Close drops what is buffered; writes fail after it.
func (r *PipeReader) Close() error {
	r.d.drop()
	return nil
}

// PipeWriter is Pipe's writing end.
type PipeWriter struct{ d *direction }

func (w *PipeWriter) Write(b []byte) (int, error) { return w.d.write(b) }

// Close ends the stream: the reader reads EOF after what is buffered.
func (w *PipeWriter) Close() error {
	w.d.end()
	return nil
}

// Abort ends the stream unfinished: the reader's next read fails.
func (w *PipeWriter) Abort() { w.d.drop() }
