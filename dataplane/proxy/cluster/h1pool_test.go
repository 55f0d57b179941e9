package cluster

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// upstream is an HTTP/1.1 server counting the connections it accepted.
func upstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	idle := &atomic.Int64{}
	var mu sync.Mutex
	states := map[net.Conn]http.ConnState{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		if states[c] == http.StateIdle {
			idle.Add(-1)
		}
		if s == http.StateIdle {
			idle.Add(1)
		}
		states[c] = s
	}
	srv.Start()
	idleConns.Store(srv, idle)
	t.Cleanup(srv.Close)
	return srv, &conns
}

// idleConns holds, per upstream server, how many of its connections are idle.
var idleConns sync.Map // *httptest.Server -> *atomic.Int64

// waitIdle waits until n of srv's connections are idle (between requests, server side).
func waitIdle(t *testing.T, srv *httptest.Server, n int64) {
	t.Helper()
	v, _ := idleConns.Load(srv)
	deadline := time.Now().Add(5 * time.Second)
	for v.(*atomic.Int64).Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections on the server, want %d", v.(*atomic.Int64).Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func get(t *testing.T, cl *Cluster, method, path string) (*http.Response, string) {
	t.Helper()
	h, err := cl.Pick(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, "http://x"+path, nil)
	resp, err := cl.RoundTrip(req, h)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestHTTP1PoolKeepsConnectionsAliveAsEnvoysPool pins the upstream HTTP/1.1 connection
// pool's observable behaviour: keep-alive reuse, a fresh connection when the server
// closed an idle one, trailers and 1xx responses, an early body close that does not
// drain an endless body, cancellation, and idle_timeout.
func TestHTTP1PoolKeepsConnectionsAliveAsEnvoysPool(t *testing.T) {
	endless := make(chan struct{})
	t.Cleanup(func() { close(endless) })
	var pair sync.WaitGroup // holds two requests until both arrived: two connections
	pair.Add(2)
	srv, conns := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pair":
			pair.Done()
			pair.Wait()
		case "/close":
			w.Header().Set("Connection", "close")
		case "/trailer":
			w.Header().Set("Trailer", "Grpc-Status")
			_, _ = io.WriteString(w, "body")
			w.Header().Set("Grpc-Status", "0")
			return
		case "/early-hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		case "/endless":
			for {
				if _, err := w.Write(make([]byte, 32*1024)); err != nil {
					return
				}
				select {
				case <-endless:
					return
				default:
				}
			}
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-endless:
			}
			return
		}
		_, _ = io.WriteString(w, "ok "+r.Method)
	})
	opts, _ := anypb.New(&httpv3.HttpProtocolOptions{CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(300 * time.Millisecond)},
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}}})
	cl, store := run(t, &clusterv3.Cluster{Name: "h1", LoadAssignment: cla("h1", nil, srv.Listener.Addr().String()),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsName: opts}})
	if cl.h1 == nil {
		t.Fatal("an HTTP/1.1 cluster has no HTTP/1.1 pool")
	}

	for i := 0; i < 5; i++ {
		if _, body := get(t, cl, "GET", "/"); body != "ok GET" {
			t.Fatalf("body %q", body)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("5 sequential requests used %d connections, want 1 (keep-alive)", conns.Load())
	}

	// The server closes its idle connections: the next GET is resent on a new one.
	waitIdle(t, srv, 1)
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Config.SetKeepAlivesEnabled(true)
	if _, body := get(t, cl, "HEAD", "/"); body != "" {
		t.Errorf("HEAD body %q", body)
	}
	if conns.Load() != 2 {
		t.Errorf("%d connections after the server closed the idle one, want 2", conns.Load())
	}

	// Two idle connections, both closed by the server (a restarted sidecar): the resend
	// dials instead of taking the other dead one.
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, _ := cl.Pick(netip.AddrPort{})
			req, _ := http.NewRequest("GET", "http://x/pair", nil)
			resp, err := cl.RoundTrip(req, h)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	waitIdle(t, srv, 2) // the server closes only connections it sees idle
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Config.SetKeepAlivesEnabled(true)
	before := conns.Load()
	if _, body := get(t, cl, "GET", "/"); body != "ok GET" {
		t.Errorf("after the server closed both idle connections: body %q", body)
	}
	if conns.Load() != before+1 {
		t.Errorf("%d new connections after the server closed both idle ones, want 1", conns.Load()-before)
	}
	if _, body := get(t, cl, "GET", "/"); body != "ok GET" {
		t.Errorf("after the server closed the idle connection: body %q", body)
	}

	resp, body := get(t, cl, "GET", "/trailer")
	if body != "body" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("trailer response: body %q trailer %v", body, resp.Trailer)
	}
	if resp, body := get(t, cl, "GET", "/early-hints"); resp.StatusCode != http.StatusOK || body != "ok GET" {
		t.Errorf("after a 103: status %d body %q", resp.StatusCode, body)
	}
	before = conns.Load()
	if _, body := get(t, cl, "GET", "/close"); body != "ok GET" {
		t.Errorf("connection: close response body %q", body)
	}
	get(t, cl, "GET", "/")
	if conns.Load() != before+1 {
		t.Errorf("a response with connection: close left its connection in the pool (%d new connections)", conns.Load()-before)
	}

	// Closing an endless body early returns at once and closes the connection.
	h, _ := cl.Pick(netip.AddrPort{})
	req, _ := http.NewRequest("GET", "http://x/endless", nil)
	resp, err := cl.RoundTrip(req, h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 1024)
	closed := make(chan struct{})
	go func() { resp.Body.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("closing an endless response body blocked (drained it)")
	}

	// Cancellation unblocks a request waiting for its response.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "GET", "http://x/slow", nil)
	if _, err := cl.RoundTrip(req, h); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("cancelled request: err %v, want a deadline error", err)
	}

	// idle_timeout closes the pooled connections.
	get(t, cl, "GET", "/")
	deadline := time.Now().Add(5 * time.Second)
	for store.Value("cluster.h1.upstream_cx_active") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("upstream_cx_active = %d after idle_timeout, want 0", store.Value("cluster.h1.upstream_cx_active"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHTTP1PoolLeavesUnreplayableRequestsToTheTransport pins which requests the pool
// sends itself: those that can be resent after a stale connection (idempotent, body
// replayable) and need no upgrade.
func TestHTTP1PoolLeavesUnreplayableRequestsToTheTransport(t *testing.T) {
	p := newH1Pool(nil, 1, time.Hour)
	body := func() io.Reader { return strings.NewReader("x") }
	for _, c := range []struct {
		name   string
		method string
		body   io.Reader
		header string
		want   bool
	}{
		{"GET without body", "GET", nil, "", true},
		{"GET with a replayable body", "GET", body(), "", true},
		{"POST is not idempotent", "POST", body(), "", false},
		{"POST with Idempotency-Key", "POST", body(), "Idempotency-Key", true},
		{"upgrade", "GET", nil, "Upgrade", false},
	} {
		req, _ := http.NewRequest(c.method, "http://x/", c.body)
		if c.header != "" {
			req.Header.Set(c.header, "v")
		}
		if got := p.handles(req); got != c.want {
			t.Errorf("%s: handles = %v, want %v", c.name, got, c.want)
		}
	}
	req, _ := http.NewRequest("GET", "http://x/", io.NopCloser(body()))
	if p.handles(req) {
		t.Error("a streaming body without GetBody is handled")
	}
}

// closeCounter is a connection that records its Close.
type closeCounter struct {
	net.Conn
	closed atomic.Bool
}

func (c *closeCounter) Close() error { c.closed.Store(true); return nil }

// TestHTTP1PoolIdleSweep: the pool's one sweep closes the connections idle for the idle
// timeout, oldest first per address, keeps the younger ones and sets itself for the
// next; get closes an expired connection the sweep has not reached instead of using it.
func TestHTTP1PoolIdleSweep(t *testing.T) {
	const timeout = time.Hour
	dialed := 0
	p := newH1Pool(func(context.Context, string, string) (net.Conn, error) {
		dialed++
		return &closeCounter{}, nil
	}, 10, timeout)
	defer p.closeIdle()
	a, b := poolKey{addr: "a:80"}, poolKey{addr: "b:80"}
	conn := func(key poolKey, idleFor time.Duration) *closeCounter {
		cc := &closeCounter{}
		pc := &h1Conn{pool: p, addr: key, conn: cc}
		p.put(pc)
		pc.since = time.Now().Add(-idleFor)
		return cc
	}
	oldA, youngA, oldB := conn(a, 2*timeout), conn(a, timeout/2), conn(b, timeout+time.Minute)
	if !p.sweeping {
		t.Fatal("no sweep set with idle connections")
	}
	p.expire()
	if !oldA.closed.Load() || !oldB.closed.Load() || youngA.closed.Load() {
		t.Fatalf("after the sweep: old a closed %v, old b closed %v, young a closed %v; want true, true, false",
			oldA.closed.Load(), oldB.closed.Load(), youngA.closed.Load())
	}
	if len(p.idle[a]) != 1 || len(p.idle[b]) != 0 || !p.sweeping {
		t.Fatalf("after the sweep: %d idle to a, %d to b, sweeping %v; want 1, 0, true", len(p.idle[a]), len(p.idle[b]), p.sweeping)
	}
	p.idle[a][0].since = time.Now().Add(-timeout)
	pc, err := p.get(context.Background(), a.addr, a, false)
	if err != nil {
		t.Fatal(err)
	}
	if !youngA.closed.Load() || pc.conn == net.Conn(youngA) || dialed != 1 {
		t.Fatalf("get took an expired connection (closed %v, dialed %d)", youngA.closed.Load(), dialed)
	}
	p.expire()
	if p.sweeping {
		t.Error("the sweep set itself again with no idle connection left")
	}
}
