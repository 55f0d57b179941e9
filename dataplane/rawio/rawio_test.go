package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection (the kernel completes the
// handshake from the listen backlog, so the dial returns before the accept).
func pair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// prefixed replays bytes read before its connection, as tlsctx.PrefixConn does.
type prefixed struct {
	net.Conn
	replay *bytes.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if p.replay.Len() == 0 {
		return p.Conn.Read(b)
	}
	return p.replay.Read(b)
}
func (p *prefixed) Buffered() int         { return p.replay.Len() }
func (p *prefixed) PassThrough() net.Conn { return p.Conn }

// opaque is a wrapper that does not declare itself pass-through.
type opaque struct{ net.Conn }

func TestRawReadsAndWrites(t *testing.T) {
	c, s := pair(t)
	r, w := Reader(s), Writer(c)
	if _, ok := r.(*reader); !ok {
		t.Fatalf("Reader of a TCP socket is %T, want the raw reader", r)
	}
	// A write larger than the socket buffers completes across EAGAINs.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	done := make(chan error, 1)
	go func() {
		n, err := w.Write(big)
		if err == nil && n != len(big) {
			err = io.ErrShortWrite
		}
		done <- err
	}()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("bytes differ")
	}
	// The peer's close is EOF.
	c.Close()
	if n, err := r.Read(got[:1]); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}

func TestRawReadDeadlineAndClose(t *testing.T) {
	_, s := pair(t)
	r := Reader(s)
	_ = s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var ne net.Error
	if _, err := r.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v; want a timeout", err)
	}
	_ = s.SetReadDeadline(time.Time{})
	go func() { time.Sleep(20 * time.Millisecond); s.Close() }()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read across Close: %v; want net.ErrClosed", err)
	}
}

func TestRawWriteErrorIsNetConns(t *testing.T) {
	c, s := pair(t)
	_ = s.SetLinger(0)
	s.Close() // a reset
	w := Writer(c)
	var err error
	for range 100 {
		if _, err = w.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var op *net.OpError
	reset := errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	if !errors.As(err, &op) || op.Op != "write" || !reset {
		t.Fatalf("write to a reset connection: %v; want net.OpError with ECONNRESET or EPIPE", err)
	}
}

func TestPassThroughWrappers(t *testing.T) {
	c, s := pair(t)
	p := &prefixed{Conn: s, replay: bytes.NewReader([]byte("GET "))}
	r := Reader(p)
	if _, ok := r.(*reader); !ok {
		t.Fatalf("Reader of a pass-through wrapper is %T, want the raw reader", r)
	}
	if _, err := c.Write([]byte("/ HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, 64)
	buf := make([]byte, 3) // smaller than the prefix: it comes out in two reads
	for len(got) < len("GET / HTTP/1.1\r\n") {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("read %q, want the prefix, then the socket's bytes", got)
	}
	if r, w := Reader(opaque{s}), Writer(opaque{s}); r != (opaque{s}) || w != (opaque{s}) {
		t.Fatalf("an opaque wrapper is read with %T and written with %T, want itself", r, w)
	}
}

func TestConn(t *testing.T) {
	c, s := pair(t)
	rc := Conn(c)
	if nc, ok := rc.(interface{ NetConn() net.Conn }); !ok || nc.NetConn() != c {
		t.Fatalf("Conn of a TCP socket is %T, want the raw conn with NetConn the socket", rc)
	}
	if _, err := rc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "ping" {
		t.Fatalf("read %q, %v; want ping", got, err)
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, got); err != nil || string(got) != "pong" {
		t.Fatalf("read %q, %v; want pong", got, err)
	}
	if err := rc.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Read(got); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read after CloseWrite: %d, %v; want EOF", n, err)
	}
	if o := (opaque{s}); Conn(o) != o {
		t.Fatal("Conn of an opaque wrapper is not itself")
	}
}

// TestNoAllocationPerCall: a raw read or write allocates nothing (a closure per call
// was an allocation each, eight per proxied HTTP/1 request), including a read that first
// waits in the netpoller for its bytes.
func TestNoAllocationPerCall(t *testing.T) {
	c, s := pair(t)
	r, w := Reader(s), Writer(c)
	msg, buf := []byte("ping"), make([]byte, 16)
	roundTrip := func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Read(buf); err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
	}
	roundTrip() // the netpoller's registration and the first wait allocate once
	if n := testing.AllocsPerRun(100, roundTrip); n != 0 {
		t.Errorf("%.1f allocations per write and read, want 0", n)
	}
	// A read that waits: the peer writes only after the reader is parked.
	kick := make(chan struct{})
	defer close(kick)
	go func() {
		for range kick {
			time.Sleep(time.Millisecond)
			_, _ = w.Write(msg)
		}
	}()
	waited := func() {
		kick <- struct{}{}
		if n, err := r.Read(buf); err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
	}
	waited()
	if n := testing.AllocsPerRun(20, waited); n != 0 {
		t.Errorf("%.1f allocations per waiting read and its write, want 0", n)
	}
}

// TestConcurrentReadsAndWrites: Reads (and Writes) of one connection from several
// goroutines, which net.Conn allows, each get their own bytes (the call's buffer is
// kept in the reader while its syscall waits).
func TestConcurrentReadsAndWrites(t *testing.T) {
	c, s := pair(t)
	rc, wc := Conn(s), Conn(c)
	const writers, each = 4, 2000
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := []byte{byte('a' + i)}
			for range each {
				if _, err := wc.Write(b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	counts := make([]int, writers)
	var mu sync.Mutex
	var rg sync.WaitGroup
	total := writers * each
	var got int
	for range 3 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			b := make([]byte, 7)
			for {
				n, err := rc.Read(b)
				mu.Lock()
				for _, x := range b[:n] {
					if x < 'a' || int(x-'a') >= writers {
						t.Errorf("read byte %q that no writer wrote", x)
					} else {
						counts[x-'a']++
					}
				}
				got += n
				finished := got >= total
				mu.Unlock()
				if err != nil || finished {
					if finished {
						_ = rc.SetReadDeadline(time.Unix(1, 0)) // the other readers stop too
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	rg.Wait()
	for i, n := range counts {
		if n != each {
			t.Errorf("writer %c: %d bytes read, want %d", 'a'+i, n, each)
		}
	}
}
