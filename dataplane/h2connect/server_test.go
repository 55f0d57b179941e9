package h2connect

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// echo answers a CONNECT with 200 and sends back every byte of the stream, flushed.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("x-authority", r.Host)
	w.Header().Set("x-baggage", r.Header.Get("baggage"))
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	_, _ = io.Copy(w, r.Body)
})

// serve starts srv on a loopback listener; it returns the listener's address and the
// Conns served (to drain them).
func serve(t *testing.T, srv *Server) (string, chan *Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan *Conn, 16)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c := srv.NewConn(ctx, nc)
			select {
			case conns <- c:
			default:
			}
			wg.Add(1)
			go func() { defer wg.Done(); c.Serve() }()
		}
	}()
	return ln.Addr().String(), conns
}

//nolint:staticcheck // SA1019: x/net's client, the one HBONE peers and the proxy's tests use
func dialClient(t *testing.T, addr string) *http2.ClientConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(context.Context, string, string, *tls.Config) (net.Conn, error) { return nc, nil }}
	cc, err := tr.NewClientConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// connect opens a CONNECT stream to authority on cc.
//
//nolint:staticcheck // SA1019: see dialClient
func connect(ctx context.Context, cc *http2.ClientConn, authority string) (io.WriteCloser, *http.Response, error) {
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodConnect, "http://"+authority, pr)
	req.Host = authority
	req.Header.Set("baggage", "k8s.namespace.name=default")
	resp, err := cc.RoundTrip(req)
	if err != nil {
		_ = pw.Close()
		return nil, nil, err
	}
	return pw, resp, nil
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Many streams on one connection, each with its own bytes both ways, at once.
func TestManyStreams(t *testing.T) {
	addr, _ := serve(t, &Server{Handler: echo})
	cc := dialClient(t, addr)
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, resp, err := connect(ctx, cc, "10.0.0.1:8080")
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("x-authority") != "10.0.0.1:8080" || resp.Header.Get("x-baggage") != "k8s.namespace.name=default" {
				errs <- errors.New("bad response " + resp.Status)
				return
			}
			msg := bytes.Repeat([]byte{byte(i)}, 1000+i*100)
			go func() { _, _ = w.Write(msg); _ = w.Close() }()
			got, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(got, msg) {
				errs <- errors.New("echo differs")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Windows far smaller than what goes through: both sides wait for WINDOW_UPDATEs.
func TestFlowControl(t *testing.T) {
	addr, _ := serve(t, &Server{Handler: echo, ConnWindow: 65535, StreamWindow: 16384, MaxReadFrameSize: 16384})
	cc := dialClient(t, addr)
	ctx := testContext(t)
	w, resp, err := connect(ctx, cc, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg := make([]byte, 4<<20)
	_, _ = rand.Read(msg)
	go func() { _, _ = w.Write(msg); _ = w.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("got %d bytes back, want the %d sent", len(got), len(msg))
	}
}

// A handler that never reads: the client's sends stop at the stream's window, and the
// stream's end frees the connection's window for the next stream.
func TestUnreadBodyReturnsWindow(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "block:1" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
			return
		}
		echo(w, r)
	})
	addr, _ := serve(t, &Server{Handler: h, ConnWindow: 65535, StreamWindow: 65535})
	cc := dialClient(t, addr)
	ctx := testContext(t)
	w, resp, err := connect(ctx, cc, "block:1")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = w.Write(make([]byte, 200000)) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = w.Close()
	w2, resp2, err := connect(ctx, cc, "10.0.0.2:80")
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 300000)
	go func() { _, _ = w2.Write(msg); _ = w2.Close() }()
	got, err := io.ReadAll(resp2.Body)
	if err != nil || len(got) != len(msg) {
		t.Fatalf("second stream: %d bytes, %v", len(got), err)
	}
}

// A stream the client resets: the handler's context ends and its body read fails.
func TestPeerReset(t *testing.T) {
	readErr := make(chan error, 1)
	ctxDone := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, err := io.Copy(io.Discard, r.Body)
		readErr <- err
		<-r.Context().Done()
		close(ctxDone)
	})
	addr, _ := serve(t, &Server{Handler: h})
	cc := dialClient(t, addr)
	ctx, cancel := context.WithCancel(testContext(t))
	w, resp, err := connect(ctx, cc, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("hello"))
	cancel() // the client resets the stream once its body writer sees the end
	w.(*io.PipeWriter).CloseWithError(errors.New("cancelled"))
	defer resp.Body.Close()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("body read ended without error after a reset")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("body read did not end after the reset")
	}
	select {
	case <-ctxDone:
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not done after the reset")
	}
}

// Drain: GoAway keeps the streams going, Shutdown's GOAWAY refuses new ones, a stream
// in flight completes and the connection then closes.
func TestGoAwayDrain(t *testing.T) {
	addr, conns := serve(t, &Server{Handler: echo})
	cc := dialClient(t, addr)
	ctx := testContext(t)
	w, resp, err := connect(ctx, cc, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	c := <-conns
	if err := c.GoAway(MaxStreamID); err != nil {
		t.Fatal(err)
	}
	c.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for cc.State().Closing == false && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !cc.State().Closing {
		t.Fatal("client did not see the GOAWAY")
	}
	if _, _, err := connect(ctx, cc, "10.0.0.1:81"); err == nil {
		t.Fatal("a new stream after the final GOAWAY was accepted")
	}
	go func() { _, _ = w.Write([]byte("in flight")); _ = w.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "in flight" {
		t.Fatalf("stream in flight: %q, %v", got, err)
	}
	for !cc.State().Closed && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !cc.State().Closed {
		t.Fatal("connection not closed after the drain")
	}
}

// Non-CONNECT requests are served too (the handler decides), with a request body.
func TestPlainRequest(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("x-path", r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write(b)
	})
	addr, _ := serve(t, &Server{Handler: h})
	cc := dialClient(t, addr)
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, "http://x/a/b", bytes.NewReader([]byte("body")))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTeapot || string(b) != "body" || resp.Header.Get("x-path") != "/a/b" {
		t.Fatalf("got %d %q %q", resp.StatusCode, b, resp.Header.Get("x-path"))
	}
}

// Streams over MaxConcurrentStreams are refused; the client waits for room.
func TestMaxConcurrentStreams(t *testing.T) {
	var mu sync.Mutex
	active, peak := 0, 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		active++
		peak = max(peak, active)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		active--
		mu.Unlock()
	})
	addr, _ := serve(t, &Server{Handler: h, MaxConcurrentStreams: 2})
	cc := dialClient(t, addr)
	ctx := testContext(t)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
			if resp, err := cc.RoundTrip(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if peak > 2 {
		t.Fatalf("%d streams at once, limit 2", peak)
	}
}

// A header list above MaxHeaderListSize gets 431.
func TestHeaderListTooLarge(t *testing.T) {
	addr, _ := serve(t, &Server{Handler: echo, MaxHeaderListSize: 1024})
	cc := dialClient(t, addr)
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodGet, "http://x/", nil)
	req.Header.Set("x-big", string(bytes.Repeat([]byte("a"), 4096)))
	resp, err := cc.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	}
}
