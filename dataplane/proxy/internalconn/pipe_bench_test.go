package internalconn

import (
	"io"
	"net"
	"testing"
)

// BenchmarkPipeRoundTrip is one request (100 bytes) and its answer (1 KB) over an
// internal connection, against net.Pipe's synchronous hand-over (what internal
// connections were before): go test ./dataplane/proxy/internalconn -bench RoundTrip.
func BenchmarkPipeRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name string
		pipe func() (net.Conn, net.Conn)
	}{{"buffered", pipe}, {"net.Pipe", net.Pipe}} {
		b.Run(tc.name, func(b *testing.B) {
			c, s := tc.pipe()
			defer c.Close()
			go func() {
				defer s.Close()
				req, resp := make([]byte, 100), make([]byte, 1024)
				for {
					if _, err := io.ReadFull(s, req); err != nil {
						return
					}
					if _, err := s.Write(resp); err != nil {
						return
					}
				}
			}()
			req, resp := make([]byte, 100), make([]byte, 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
