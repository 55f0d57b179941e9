package tcpproxy

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// h2cServer serves handler over HTTP/2 with prior knowledge on a loopback port; it
// returns a dial of a new connection to it.
func h2cServer(tb testing.TB, handler http.HandlerFunc) func() net.Conn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: handler, Protocols: &protos}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	tb.Cleanup(func() { _ = hs.Close(); <-done })
	return func() net.Conn {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			tb.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
}

// echo answers a CONNECT with 200 and sends back what it reads, flushing each chunk.
func echo(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("x-got", r.Header.Get("x-sent")+"|"+r.Host)
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		if err != nil {
			return
		}
	}
}

// Megabytes both ways through one stream, reading and writing at once as tcp_proxy
// does: both sides' flow-control windows are used up and given back many times over.
func TestH2StreamCarriesMoreThanTheWindowsBothWays(t *testing.T) {
	dial := h2cServer(t, echo)
	conn := dial()
	s, status, err := openH2Stream(conn, "10.0.0.1:8080", http.Header{"X-Sent": {"v"}})
	if err != nil || status != http.StatusOK {
		t.Fatalf("open = %d, %v", status, err)
	}
	defer s.Close()
	payload := make([]byte, h2StreamWindow+12345)
	_, _ = rand.Read(payload)
	werr := make(chan error, 1)
	go func() {
		for b := payload; len(b) > 0; {
			n := min(len(b), 50000)
			if _, err := s.Write(b[:n]); err != nil {
				werr <- err
				return
			}
			b = b[n:]
		}
		werr <- s.CloseWrite()
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read: %v after %d bytes", err, len(got))
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, not the %d sent", len(got), len(payload))
	}
}

// A writer nobody reads for still gets its window: it reads the peer's WINDOW_UPDATEs
// itself (here the peer sends its DATA only once it has the whole request).
func TestH2StreamWriterReadsForItsWindow(t *testing.T) {
	dial := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, http.StatusText(http.StatusOK)+" "+string(rune('0'+n%10)))
	})
	s, status, err := openH2Stream(dial(), "10.0.0.1:80", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("open = %d, %v", status, err)
	}
	defer s.Close()
	payload := make([]byte, 5<<20) // beyond the server's 1 MiB stream window
	if n, err := s.Write(payload); err != nil || n != len(payload) {
		t.Fatalf("write = %d, %v", n, err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "OK 0" {
		t.Fatalf("answer = %q, %v", got, err)
	}
}

// The CONNECT's answer decides the tunnel: a non-2xx status is returned as it is, the
// request's headers and :authority reach the server, and the response headers are read.
func TestH2StreamStatusAndHeaders(t *testing.T) {
	got := make(chan string, 1)
	dial := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.Host + " " + r.Header.Get("X-Forwarded-Network")
		w.WriteHeader(http.StatusUnauthorized)
	})
	s, status, err := openH2Stream(dial(), "10.1.2.3:9080", http.Header{"X-Forwarded-Network": {"net-a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if status != http.StatusUnauthorized {
		t.Errorf("status = %d, want 401", status)
	}
	if r := <-got; r != "CONNECT 10.1.2.3:9080 net-a" {
		t.Errorf("server saw %q", r)
	}
}

// A peer that resets the stream fails the reader; Close after it neither blocks nor
// leaks (goleak in TestMain).
func TestH2StreamResetByPeer(t *testing.T) {
	dial := h2cServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the server resets the stream
	})
	s, status, err := openH2Stream(dial(), "10.0.0.1:80", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("open = %d, %v", status, err)
	}
	if _, err := io.ReadAll(s); err == nil {
		t.Error("read of a reset stream succeeded")
	}
	_ = s.Close()
	if _, err := s.Write([]byte("x")); err == nil {
		t.Error("write after Close succeeded")
	}
}

// BenchmarkH2StreamRoundTrip is one tunnel's request and answer (1 KB each way) through
// an echoing HTTP/2 server on loopback: go test ./dataplane/proxy/tcpproxy -run '^$'
// -bench H2StreamRoundTrip.
func BenchmarkH2StreamRoundTrip(b *testing.B) {
	dial := h2cServer(b, echo)
	s, status, err := openH2Stream(dial(), "10.0.0.1:80", nil)
	if err != nil || status != http.StatusOK {
		b.Fatalf("open = %d, %v", status, err)
	}
	defer s.Close()
	msg := make([]byte, 1024)
	got := make([]byte, 1024)
	b.ResetTimer()
	for range b.N {
		if _, err := s.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(s, got); err != nil {
			b.Fatal(err)
		}
	}
}
