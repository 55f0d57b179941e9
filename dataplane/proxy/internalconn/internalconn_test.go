package internalconn

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// An internal connection carries half-closes: the side that ends its direction still
// reads the other's, which reads EOF.
func TestHalfClose(t *testing.T) {
	r := NewRegistry()
	served := make(chan error, 1)
	r.Register("l", func(c *Conn) func() {
		return func() {
			defer c.Close()
			b, err := io.ReadAll(c) // until the client's CloseWrite
			if err == nil {
				_, err = c.Write(append([]byte("got "), b...))
			}
			served <- err
		}
	})
	c, err := r.Dial(context.Background(), Addr{Listener: "l"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*Conn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got ping" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after CloseWrite: %v, want io.ErrClosedPipe", err)
	}
}

// Objects shared once arrive unshared; transitive ones stay transitive; unshared ones
// do not pass.
func TestFilterStateSharing(t *testing.T) {
	ctx := WithFilterState(context.Background(), map[string]Object{
		"once": {Value: "1", Sharing: SharedOnce}, "trans": {Value: "2", Sharing: SharedTransitive}, "none": {Value: "3"},
	})
	got := Received(FilterStateFrom(ctx))
	if len(got) != 2 || got["once"] != (Object{Value: "1"}) || got["trans"] != (Object{Value: "2", Sharing: SharedTransitive}) {
		t.Errorf("received %v", got)
	}
}

// The buffered pipe behaves as a net.Conn: x/net's conformance tests (I/O, deadlines,
// close, concurrent use).
func TestPipeConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2 = pipe()
		return c1, c2, func() { _ = c1.Close(); _ = c2.Close() }, nil
	})
}

// What an end wrote before it closed still reaches the peer, then EOF; a writer does
// not wait for its reader.
func TestPipeCloseAfterWrite(t *testing.T) {
	a, b := pipe()
	defer b.Close()
	if _, err := a.Write([]byte("response")); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "response" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write to a closed peer: %v, want io.ErrClosedPipe", err)
	}
}

// A read deadline interrupts a ReadAhead's waiting Read, and a later Read goes on with
// the stream (the HTTP/1 server's disconnect watch interrupts its read this way between
// requests); the stream's end reads EOF after what it sent.
func TestReadAheadDeadline(t *testing.T) {
	pr, pw := io.Pipe()
	ra := NewReadAhead(pr)
	defer ra.Close()
	got := make(chan error, 1)
	go func() {
		_, err := ra.Read(make([]byte, 8))
		got <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the Read wait (it returns either way)
	_ = ra.SetReadDeadline(time.Unix(1, 0))
	if err := <-got; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read under a passed deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	_ = ra.SetReadDeadline(time.Time{})
	go func() {
		_, _ = pw.Write([]byte("next request"))
		_ = pw.Close()
	}()
	b, err := io.ReadAll(ra)
	if err != nil || string(b) != "next request" {
		t.Fatalf("read after the deadline was cleared: %q, %v", b, err)
	}
}
