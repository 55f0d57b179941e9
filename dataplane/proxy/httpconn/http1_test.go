package httpconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// rawExchange writes raw bytes to addr and returns everything the proxy sent until it
// closed the connection, or until idle passed without a byte (then open is true).
func rawExchange(t *testing.T, addr, raw string, idle time.Duration) (got string, open bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		n, err := c.Read(buf)
		b.Write(buf[:n])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return b.String(), true
		}
		if err != nil {
			return b.String(), false
		}
	}
}

// directLab answers /one and /two with those bodies (direct_response).
func directLab(t *testing.T) *lab {
	t.Helper()
	answer := func(body string) *routev3.Route {
		return &routev3.Route{Match: prefix("/" + body), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}}}}
	}
	return newLab(t, nil, answer("one"), answer("two"))
}

func TestHTTP1CodecAsEnvoys(t *testing.T) {
	l := directLab(t)
	big := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		name     string
		raw      string
		want     []string // substrings, in this order
		wantNot  []string
		wantOpen bool
	}{
		{"header names are written in lower case", "GET /one HTTP/1.1\r\nHost: a\r\n\r\n",
			[]string{"HTTP/1.1 200 OK\r\n", "content-length: 3\r\n", "\r\nserver: envoy\r\n", "\r\none"}, []string{"Content-Length"}, true},
		{"pipelined requests are answered in order on one connection", "GET /two HTTP/1.1\r\nHost: a\r\n\r\nGET /one HTTP/1.1\r\nHost: a\r\n\r\n",
			[]string{"\r\n\r\ntwo", "HTTP/1.1 200 OK", "\r\n\r\none"}, nil, true},
		{"a malformed request line is a codec error: 400 and close", "GARBAGE\r\n\r\n",
			[]string{"HTTP/1.1 400 Bad Request\r\n", "connection: close\r\n", "\r\n\r\nBad Request"}, nil, false},
		{"HTTP/1.1 without a host header is a codec error", "GET /one HTTP/1.1\r\n\r\n",
			[]string{"HTTP/1.1 400 Bad Request\r\n"}, nil, false},
		{"a request head over max_request_headers_kb is answered 431", "GET /one HTTP/1.1\r\nHost: a\r\nX-Big: " + big + "\r\n\r\n",
			[]string{"HTTP/1.1 431 Request Header Fields Too Large\r\n"}, nil, false},
		{"more fields than max_headers_count (100) is answered 431", "GET /one HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("x-h: v\r\n", 100) + "\r\n",
			[]string{"HTTP/1.1 431 Request Header Fields Too Large\r\n"}, nil, false},
		{"transfer-encoding with content-length is a codec error (no allow_chunked_length)",
			"POST /one HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
			[]string{"HTTP/1.1 400 Bad Request\r\n"}, nil, false},
		{"two content-length fields are a codec error, even equal", "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
			[]string{"HTTP/1.1 400 Bad Request\r\n"}, nil, false},
		{"HTTP/1.0 without keep-alive is closed after the response", "GET /one HTTP/1.0\r\nHost: a\r\n\r\n",
			[]string{"HTTP/1.0 200 OK\r\n", "connection: close\r\n", "\r\n\r\none"}, nil, false},
		{"HTTP/1.0 with keep-alive stays open", "GET /one HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
			[]string{"HTTP/1.0 200 OK\r\n", "connection: keep-alive\r\n", "\r\n\r\none"}, nil, true},
		{"connection: close from the client closes after the response", "GET /one HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
			[]string{"connection: close\r\n", "\r\n\r\none"}, nil, false},
		{"a HEAD response has the headers and no body", "HEAD /one HTTP/1.1\r\nHost: a\r\n\r\n",
			[]string{"content-length: 3\r\n"}, []string{"\r\n\r\none"}, true},
		{"100-continue answered before the body was asked for closes the connection (no 100 after the final answer)",
			"POST /one HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
			[]string{"HTTP/1.1 200 OK\r\n", "connection: close\r\n", "\r\none"}, []string{"100 Continue"}, false},
		{"an unknown expectation is refused with 417", "POST /one HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx",
			[]string{"HTTP/1.1 417 Expectation Failed\r\n"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, open := rawExchange(t, l.addr, tc.raw, 300*time.Millisecond)
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("response lacks %q (in order):\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("response has %q:\n%s", w, got)
				}
			}
			if open != tc.wantOpen {
				t.Errorf("connection open after the response = %v, want %v:\n%s", open, tc.wantOpen, got)
			}
		})
	}
	if n := l.store.Value("http.lab.downstream_cx_protocol_error"); n != 6 {
		t.Errorf("downstream_cx_protocol_error = %d, want 6", n)
	}
	// Envoy logs a codec error's local reply with the DPE flag.
	dpe := 0
	for _, line := range l.waitLines(t, 6) {
		if strings.Contains(line, `"- - HTTP/1.1" 400 DPE `) || strings.Contains(line, `"- - HTTP/1.1" 431 DPE `) {
			dpe++
		}
	}
	if dpe != 6 {
		t.Errorf("%d access log lines with 400/431 DPE, want 6:\n%s", dpe, strings.Join(l.logLines(t), "\n"))
	}
}

func TestHTTP1ExpectContinueIsAnsweredByTheProxy(t *testing.T) {
	var expect atomic.Value
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		expect.Store(r.Header.Get("Expect"))
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "up", up)}, routeTo(prefix("/"), to("up")))
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line = %q, %v; want the proxy's 100 Continue before the body is sent", line, err)
	}
	_, _ = br.ReadString('\n')
	_, _ = io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Errorf("response %d %q, want 200 hello", resp.StatusCode, body)
	}
	if e := expect.Load(); e != "" {
		t.Errorf("upstream saw Expect %q; Envoy answers 100-continue itself and does not forward it", e)
	}
}

// TestHTTP1ClientGoneCancelsTheUpstreamRequest: the client going away mid-request
// cancels the upstream request, logged DC, under Envoy's default route timeout (the pool
// watches the request's context) and under Istio's (route timeout 0, a retry policy
// without a per-try timeout, stream_idle_timeout 0: the connection's abort hook stands
// for the context).
func TestHTTP1ClientGoneCancelsTheUpstreamRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*hcmv3.HttpConnectionManager)
		action func() *routev3.RouteAction
	}{
		{"envoy default timeout", nil, func() *routev3.RouteAction { return to("up") }},
		{"istio timeout 0", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) }, func() *routev3.RouteAction {
			a := to("up")
			a.Timeout = durationpb.New(0)
			a.RetryPolicy = &routev3.RetryPolicy{RetryOn: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
				NumRetries: wrapperspb.UInt32(2)}
			return a
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := make(chan struct{})
			up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
					close(cancelled)
				case <-time.After(10 * time.Second):
				}
			})
			l := newLabHCM(t, tc.mutate, []*cluster.Config{staticCluster(t, "up", up)}, routeTo(prefix("/"), tc.action()))
			c, err := net.Dial("tcp", l.addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			time.Sleep(50 * time.Millisecond) // the request reached the upstream
			c.Close()
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled after the client went away (Envoy resets it)")
			}
			// The entry is written once the router has returned, just after the cancellation.
			deadline := time.Now().Add(5 * time.Second)
			var entry []byte
			for len(entry) == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				entry, _ = os.ReadFile(l.logPath) // created with the first entry
			}
			if !strings.Contains(string(entry), " DC ") {
				t.Errorf("access log %q lacks the DC flag", entry)
			}
		})
	}
}

// TestHTTP1DisconnectWatchOnAKeptConnection: the connection's one watch timer serves
// request after request: slow requests (watched) and fast ones (never watched) answer
// on the same connection, nothing is cancelled while the client stays, and the last
// request is still cancelled when the client goes away.
func TestHTTP1DisconnectWatchOnAKeptConnection(t *testing.T) {
	cancelled := make(chan string, 8)
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		select {
		case <-r.Context().Done():
			cancelled <- r.URL.RawQuery
		case <-time.After(d):
			_, _ = io.WriteString(w, r.URL.RawQuery)
		}
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "up", up)}, routeTo(prefix("/"), to("up")))
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	slow := disconnectWatchDelay + 20*time.Millisecond // watched
	for i, d := range []time.Duration{2 * slow, 0, slow, 0, 0, slow} {
		q := fmt.Sprintf("d=%s&i=%d", d, i)
		_, _ = io.WriteString(c, "GET /?"+q+" HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d (%s): %v", i, q, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != q {
			t.Fatalf("request %d: %d %q, want 200 %q", i, resp.StatusCode, body, q)
		}
	}
	select {
	case q := <-cancelled:
		t.Fatalf("request %s was cancelled while its client stayed", q)
	default:
	}
	_, _ = io.WriteString(c, "GET /?d=10s HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(50 * time.Millisecond) // the request reached the upstream
	c.Close()
	select {
	case q := <-cancelled:
		if q != "d=10s" {
			t.Errorf("cancelled %q, want the last request", q)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled after the client went away")
	}
}

func TestHTTP1UpstreamResetMidBodyResetsTheClient(t *testing.T) {
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = bw.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		_ = bw.Flush()
		conn.Close()
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "up", up)}, routeTo(prefix("/"), to("up")))
	got, open := rawExchange(t, l.addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 2*time.Second)
	if !strings.Contains(got, "hello") || strings.Contains(got, "0\r\n\r\n") || open {
		t.Errorf("client saw %q (open %v): want the partial body, no terminating chunk, and the connection closed", got, open)
	}
}

// TestHTTP1ShutdownCancelsTheUpstreamRequest: the proxy shutting down (the serving
// context ending) cancels a request in flight upstream and ends the connection, with
// Istio's route (timeout 0, no per-try timeout) and stream_idle_timeout 0, where the
// connection's abort hook, not a watch of the request's context, interrupts the pool.
func TestHTTP1ShutdownCancelsTheUpstreamRequest(t *testing.T) {
	// The disconnect watch would also cancel the request once the closed connection is
	// read: kept away, so that only shutdown's own path can.
	saved := disconnectWatchDelay
	disconnectWatchDelay = time.Minute
	defer func() { disconnectWatchDelay = saved }()
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	store := stats.NewStore()
	cm := cluster.NewManager(store)
	cm.AddStatic([]*cluster.Config{staticCluster(t, "up", up)})
	t.Cleanup(cm.Close)
	action := to("up")
	action.Timeout = durationpb.New(0)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:        "lab",
		StreamIdleTimeout: durationpb.New(0),
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{routeTo(prefix("/"), action)}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
	}
	cfg, err := Compile(mustAny(t, hcm))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	served := make(chan struct{})
	go func() {
		defer close(served)
		ServeConn(ctx, cfg, Deps{Routes: NewRouteStore(), Clusters: cm, Stats: store, Logger: testutil.Logger(t)}, sc, Downstream{})
	}()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	shutdown()
	for name, ch := range map[string]chan struct{}{"the upstream request was cancelled": cancelled, "the connection was served to its end": served} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("shutdown: not done within 5 s: %s", name)
		}
	}
}
