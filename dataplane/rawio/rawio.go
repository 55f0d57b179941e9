// Package rawio reads and writes a proxy's plaintext TCP sockets for its HTTP/1 codecs
// without the Go runtime's blocking-syscall bookkeeping.
//
// A read or write of a Go socket is a non-blocking system call wrapped in
// entersyscall/exitsyscall: the goroutine's P is marked as in a syscall, and sysmon, the
// runtime's monitor thread, is woken if it was asleep so that it can hand the P to another
// thread should the call block. On a socket that never blocks (EAGAIN is answered by
// waiting in the netpoller) that is pure cost: in `perf record` of the sidecars at
// BenchmarkDataPath's max rate, sysmon's 20 µs naps and the futex wake-ups that start
// them were about a tenth of each proxy's CPU, re-armed at every request by the first
// syscall after the proxy went idle. Envoy's worker makes the same calls straight from its
// event loop. Here the call is made with syscall.RawSyscall inside the socket's RawConn,
// which keeps the netpoller's waiting, deadlines and Close as net.Conn's Read and Write
// have them.
//
// It relies on the socket being non-blocking, as Go's net package leaves every socket it
// made: a RawSyscall on a blocking socket would hold its thread and P until the peer
// sends (os.File.Fd on a dup of the socket switches it to blocking; the proxy calls File
// only on listen sockets, for hot restart, never on a connection).
//
// Only the bytes pass here: the connection itself (its type, Close, CloseWrite,
// deadlines, TLS) is untouched, and anything that is not a plain TCP socket under
// pass-through wrappers is read and written as before.
package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// A PassThrough connection wraps another whose reads and writes it passes on unchanged
// (beyond bytes it reports with Buffered, which it returns first).
type PassThrough interface {
	PassThrough() net.Conn
}

// buffered is a wrapper holding bytes read before it (a listener's inspected prefix).
type buffered interface {
	Buffered() int
}

// socket returns the RawConn of the TCP socket under c's pass-through wrappers and
// the wrappers that hold bytes of their own, or nil when c is no plain TCP socket.
func socket(c net.Conn) (syscall.RawConn, []buffered) {
	var pending []buffered
	for range 8 {
		switch x := c.(type) {
		case *net.TCPConn:
			rc, err := x.SyscallConn()
			if err != nil {
				return nil, nil
			}
			return rc, pending
		case PassThrough:
			if b, ok := c.(buffered); ok {
				pending = append(pending, b)
			}
			c = x.PassThrough()
		default:
			return nil, nil
		}
	}
	return nil, nil
}

// Reader returns a reader of c: raw reads of its socket when c is a TCP socket under
// pass-through wrappers, else c itself.
func Reader(c net.Conn) io.Reader {
	rc, pending := socket(c)
	if rc == nil {
		return c
	}
	return newReader(c, rc, pending)
}

// Writer returns a writer of c: raw writes to its socket when c is a TCP socket under
// pass-through wrappers, else c itself.
func Writer(c net.Conn) io.Writer {
	rc, _ := socket(c)
	if rc == nil {
		return c
	}
	return newWriter(c, rc)
}

// reader and writer pass their system call to the RawConn as a method value made once
// per connection: a closure over the call's buffer and results escapes to the heap (the
// RawConn is an interface), which was an allocation per read and per write, four of each
// per proxied HTTP/1 request (the data, then EAGAIN, on each side). The call's buffer and
// results live in the struct instead, under mu: net.Conn allows concurrent Reads (and
// Writes), which the socket's own lock would otherwise serialize with the buffer already
// overwritten.
type reader struct {
	conn    net.Conn
	rc      syscall.RawConn
	pending []buffered

	mu    sync.Mutex
	read  func(fd uintptr) bool // r.readFD, made once
	buf   []byte                // the call's buffer, nil between calls
	n     int
	errno syscall.Errno
}

func newReader(c net.Conn, rc syscall.RawConn, pending []buffered) *reader {
	r := &reader{conn: c, rc: rc, pending: pending}
	r.read = r.readFD
	return r
}

func (r *reader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.pending {
		if b.Buffered() > 0 {
			return r.conn.Read(p) // the wrapper's own bytes first
		}
	}
	r.pending = nil
	if len(p) == 0 {
		return 0, nil
	}
	r.buf, r.n, r.errno = p, 0, 0
	err := r.rc.Read(r.read)
	n, errno := r.n, r.errno
	r.buf = nil // the caller's buffer is not kept
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, opError("read", r.conn, errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readFD is one raw read of r.buf; it reports false to wait in the netpoller.
func (r *reader) readFD(fd uintptr) bool {
	p := r.buf
	for {
		r1, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait in the netpoller, as net.Conn's Read does
		}
		r.n, r.errno = int(r1), e
		return true
	}
}

type writer struct {
	conn net.Conn
	rc   syscall.RawConn

	mu    sync.Mutex
	write func(fd uintptr) bool // w.writeFD, made once
	buf   []byte                // the call's bytes, nil between calls
	n     int                   // of buf written so far
	errno syscall.Errno
}

func newWriter(c net.Conn, rc syscall.RawConn) *writer {
	w := &writer{conn: c, rc: rc}
	w.write = w.writeFD
	return w
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf, w.n, w.errno = p, 0, 0
	err := w.rc.Write(w.write)
	n, errno := w.n, w.errno
	w.buf = nil // the caller's bytes are not kept
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, opError("write", w.conn, errno)
	}
	return n, nil
}

// writeFD writes the rest of w.buf; it reports false to wait until the socket's buffer
// drains.
func (w *writer) writeFD(fd uintptr) bool {
	p := w.buf
	for w.n < len(p) {
		rest := p[w.n:]
		r1, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			w.n += int(r1)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the socket's buffer is full: wait until it drains
		default:
			w.errno = e
			return true
		}
	}
	return true
}

// opError is the error net.Conn's Read or Write returns for errno.
func opError(op string, c net.Conn, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// Conn returns c with raw reads and writes (for a TLS connection over it: crypto/tls
// reads and writes the connection it is given), or c itself when it is no plain TCP
// socket under pass-through wrappers. NetConn returns c.
func Conn(c net.Conn) net.Conn {
	rc, pending := socket(c)
	if rc == nil {
		return c
	}
	return &rawConn{Conn: c, r: newReader(c, rc, pending), w: newWriter(c, rc)}
}

type rawConn struct {
	net.Conn
	r *reader
	w *writer
}

func (c *rawConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *rawConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// NetConn returns the connection under the raw reads and writes.
func (c *rawConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection when it supports it.
func (c *rawConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
