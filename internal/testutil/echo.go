package testutil

import (
	"io"
	"net"
	"net/netip"
	"testing"
)

// EchoServer listens on 127.0.0.1 and echoes every connection until its client closes
// it; the listener is closed, and its accept loop ended, when the test ends.
func EchoServer(tb testing.TB) netip.AddrPort {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	tb.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}
