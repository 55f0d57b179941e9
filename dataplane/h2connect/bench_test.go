package h2connect

import (
	"context"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// echoFlushed answers a CONNECT with 200 and echoes each chunk, flushed (as ztunnel's
// inbound and the waypoint's connect_terminate write a tunnel's bytes).
var echoFlushed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
})

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkConnectRoundTrip sends 1 KB through one CONNECT stream and reads the echo
// back, per op: the proxy's server (h2connect) against x/net/http2's, the client x/net's
// in both. cpu-µs/op is the process's CPU (client and server) per round trip.
func BenchmarkConnectRoundTrip(b *testing.B) {
	servers := map[string]func(ctx context.Context, nc net.Conn){
		"h2connect": func(ctx context.Context, nc net.Conn) {
			(&Server{Handler: echoFlushed}).ServeConn(ctx, nc)
		},
		"xnet": func(ctx context.Context, nc net.Conn) {
			(&http2.Server{}).ServeConn(nc, &http2.ServeConnOpts{Context: ctx, Handler: echoFlushed}) //nolint:staticcheck // SA1019: the server compared against
		},
	}
	for _, name := range []string{"h2connect", "xnet"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for {
					nc, err := ln.Accept()
					if err != nil {
						return
					}
					go servers[name](ctx, nc)
				}
			}()
			defer ln.Close()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			tr := &http2.Transport{AllowHTTP: true} //nolint:staticcheck // SA1019: the client HBONE peers use
			cc, err := tr.NewClientConn(nc)         //nolint:staticcheck // SA1019: see above
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			w, resp, err := connect(ctx, cc, "10.0.0.1:80")
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			defer w.Close()
			msg, got := make([]byte, 1024), make([]byte, 1024)
			b.ResetTimer()
			start := cpuTime()
			for range b.N {
				if _, err := w.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(resp.Body, got); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
