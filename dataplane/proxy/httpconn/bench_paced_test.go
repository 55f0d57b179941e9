package httpconn

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkForwardPaced sends requests through the "istio-sidecar" proxy at a fixed
// rate, as BenchmarkDataPath's 1000 qps cells do (4 connections, 1000 requests a second
// in all, 1 KB answers), and reports the round trip's latency through the proxy at p50,
// p90 and p99, and the process's CPU per request (client, proxy and backend). At this rate every request finds the proxy idle, so what it
// measures is the proxy's wake-ups and hand-offs, not its throughput.
//
// "istio-sidecar" and "istio-sidecar-mtls" space the connections 1 ms apart, so no two
// requests meet in the proxy. "istio-sidecar-burst" sends as fortio does at a fixed
// rate: its connections share one start and one schedule, so the 4 requests of each
// 4 ms leave together and queue behind each other in the proxy; its p90 is the last of
// the four, which is what BenchmarkDataPath's p90 at 1000 qps measures.
// Run: go test ./dataplane/proxy/httpconn -run '^$' -bench ForwardPaced -benchtime 4000x
func BenchmarkForwardPaced(b *testing.B) {
	for _, bc := range []struct {
		name   string
		mtls   bool
		spread time.Duration // between the connections' schedules
	}{
		{"istio-sidecar", false, time.Millisecond},
		{"istio-sidecar-mtls", true, time.Millisecond},
		{"istio-sidecar-burst", false, 0},
	} {
		mtls := bc.mtls
		b.Run(bc.name, func(b *testing.B) {
			l := newSidecarLab(b, mtls)
			head := "GET /bytes/1024 HTTP/1.1\r\nhost: " + l.addr + "\r\nuser-agent: fortio.org/fortio-1.69.1\r\n\r\n"
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			lat := paced(b, l.addr, head, b.N, bc.spread)
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
			slices.Sort(lat)
			q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-us")
			b.ReportMetric(q(0.9), "p90-us")
			b.ReportMetric(q(0.99), "p99-us")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/req")
			checkSidecarStats(b, l, mtls)
		})
	}
}

// paced sends n requests to addr on 4 keep-alive connections, 1000 a second in all
// (each connection every 4 ms, the connections spread apart), and returns each one's
// latency.
func paced(b *testing.B, addr, head string, n int, spread time.Duration) []time.Duration {
	b.Helper()
	const conns, interval = 4, 4 * time.Millisecond
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now().Add(10 * time.Millisecond)
	for c := 0; c < conns; c++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReader(conn)
			for i := c; i < n; i += conns {
				at := start.Add(time.Duration(i/conns)*interval + time.Duration(c)*spread)
				time.Sleep(time.Until(at))
				t0 := time.Now()
				if _, err := io.WriteString(conn, head); err != nil {
					b.Error(err)
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Error(err)
					return
				}
				m, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode != http.StatusOK || m != 1024 {
					b.Errorf("answer %d, %d bytes", resp.StatusCode, m)
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat
}
