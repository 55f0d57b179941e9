package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// drainBootstrap is a static HTTP listener "web" on 127.0.0.1:0 routing to a STATIC
// cluster of be.
func drainBootstrap(t *testing.T, be netip.AddrPort) *bootstrapv3.Bootstrap {
	t.Helper()
	return &bootstrapv3.Bootstrap{
		Admin: &bootstrapv3.Admin{Address: socketAddr("127.0.0.1", 0)},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{{
				Name:                 "backend",
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				ConnectTimeout:       durationpb.New(time.Second),
				LoadAssignment:       assignment("backend", be),
			}},
			Listeners: []*listenerv3.Listener{{
				Name:         "web",
				Address:      socketAddr("127.0.0.1", 0),
				FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmInline(t, "web", routeConfig("local", vhostTo("all", []string{"*"}, "backend")))}}},
			}},
		},
	}
}

// rawRequest writes one HTTP/1.1 request on c and reads its response.
func rawRequest(t *testing.T, c net.Conn, r *bufio.Reader, path string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
		t.Fatalf("write request: %v", err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// TestHotRestartParentDrain pins what a parent does on DrainListeners: it stops
// accepting at once, reports DRAINING, closes idle keep-alive connections, lets the
// in-flight request finish with Connection: close and then closes that connection.
func TestHotRestartParentDrain(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(be.Close)
	// The drain outlasts the test's checks, however slow the machine, and is immediate
	// (a gradual one closes a growing share of responses over the drain time): the
	// in-flight response is written while draining, so it carries Connection: close.
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), drainBootstrap(t, netip.MustParseAddrPort(be.Listener.Addr().String()))), func(o *Options) {
		o.DrainTime = time.Minute
		o.DrainStrategy = DrainImmediate
	})
	<-srv.Started()
	addr, ok := srv.ListenerAddr("web")
	if !ok {
		t.Fatal("listener web is not bound")
	}
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	idle, idleR := dial()
	if resp := rawRequest(t, idle, idleR, "/"); resp.Close || resp.StatusCode != 200 {
		t.Fatalf("before the drain: status %d, close %v; want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	busy, busyR := dial()
	if _, err := io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-arrived

	restartParent{srv}.DrainListeners()

	if st := srv.State(); st != adminv3.ServerInfo_DRAINING {
		t.Errorf("state = %s, want DRAINING", st)
	}
	if _, body := adminGet(t, srv, "/server_info"); !strings.Contains(body, `"state": "DRAINING"`) {
		t.Errorf("/server_info does not say DRAINING:\n%s", body)
	}
	if c, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		_ = c.Close()
		t.Error("a new connection was accepted after DrainListeners")
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := idleR.ReadByte(); err == nil {
		t.Errorf("idle keep-alive connection got data %q instead of being closed", n)
	}
	close(release)
	resp, err := http.ReadResponse(busyR, nil)
	if err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	// ReadResponse turns Connection: close into resp.Close.
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("in-flight response: status %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := busyR.ReadByte(); err == nil {
		t.Error("the connection stayed open after its Connection: close response")
	}
	if v := srv.StatsStore().Value("http.web.downstream_cx_drain_close"); v < 1 {
		t.Errorf("http.web.downstream_cx_drain_close = %d, want >= 1", v)
	}
}

// TestAdminGracefulDrainSendsConnectionClose pins POST /drain_listeners?graceful: open
// HTTP/1 connections are told to close while the listener keeps accepting until the
// drain time ends.
func TestAdminGracefulDrainSendsConnectionClose(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(be.Close)
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), drainBootstrap(t, netip.MustParseAddrPort(be.Listener.Addr().String()))), func(o *Options) {
		o.DrainTime = time.Hour
		o.DrainStrategy = DrainImmediate // as Istio's agent runs it
	})
	<-srv.Started()
	addr, _ := srv.ListenerAddr("web")
	if code, body := adminPost(t, srv, "/drain_listeners?graceful"); code != 200 || body != "OK\n" {
		t.Fatalf("drain_listeners = %d %q", code, body)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("a graceful drain stopped accepting before the drain time: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if resp := rawRequest(t, c, bufio.NewReader(c), "/"); resp.StatusCode != 200 || !resp.Close {
		t.Errorf("status %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	if st := srv.State(); st != adminv3.ServerInfo_LIVE {
		t.Errorf("state = %s; an admin drain does not change the server state", st)
	}
}

// TestGradualDrainRampsUpConnectionClose pins --drain-strategy gradual: in the first
// second of the drain no response closes its connection (Envoy's probability is
// elapsed/drain time in whole seconds), and when the drain time has passed every
// connection is closed, idle ones included.
func TestGradualDrainRampsUpConnectionClose(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(be.Close)
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), drainBootstrap(t, netip.MustParseAddrPort(be.Listener.Addr().String()))), func(o *Options) {
		o.DrainTime = 2 * time.Second
		o.DrainStrategy = DrainGradual
	})
	<-srv.Started()
	addr, _ := srv.ListenerAddr("web")
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	if code, _ := adminPost(t, srv, "/drain_listeners?graceful&skip_exit"); code != 200 {
		t.Fatalf("drain_listeners = %d", code)
	}
	started := time.Now()
	for i := 0; i < 3; i++ {
		resp := rawRequest(t, c, r, "/")
		if time.Since(started) >= time.Second {
			t.Skip("the machine is too slow to stay within the drain's first second")
		}
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("request %d in the first second: status %d, close %v; want 200 keep-alive", i, resp.StatusCode, resp.Close)
		}
	}
	// At the end of the drain time the idle connection is closed.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := r.ReadByte(); err == nil {
		t.Fatalf("idle connection got %q instead of being closed at the end of the drain", b)
	}
	if el := time.Since(started); el < 1900*time.Millisecond {
		t.Errorf("idle connection closed after %s, before the 2s drain time", el)
	}
}

// TestHotRestartParentTerminatedMidDrainAnswersReadRequests pins what a parent does
// when it is terminated before its child's --parent-shutdown-time-s (restarts in quick
// succession: its grandchild started, or the agent stopped it as superseded), here after
// its drain time: a request it has already read is answered, with Connection: close,
// before it exits; it does not cut the connection under the request (the client, on a
// fresh connection, would see EOF and not retry). Run returns once that connection is
// gone.
func TestHotRestartParentTerminatedMidDrainAnswersReadRequests(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(be.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // a failed test must not leave the backend's handler blocked
		}
	})
	path := writeBootstrap(t, t.TempDir(), drainBootstrap(t, netip.MustParseAddrPort(be.Listener.Addr().String())))
	opts, err := ParseArgs([]string{"-c", path, "--drain-time-s", "1", "--parent-shutdown-time-s", "60", "--drain-strategy", "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(opts, testutil.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		srv.Quit()
		<-done
	})
	<-srv.Started()
	addr, ok := srv.ListenerAddr("web")
	if !ok {
		t.Fatal("listener web is not bound")
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-arrived

	restartParent{srv}.DrainListeners()
	restartParent{srv}.Terminate()

	// Run must wait for the request: the backend has not answered yet.
	select {
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("Run returned (%v) while a request it had read was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("in-flight request of a terminated parent: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("in-flight response: status %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run did not return once its last connection ended")
	}
}

// TestHotRestartParentTerminatedAfterDrainExitsAtOnce pins the other side: past
// DrainListeners + --parent-shutdown-time-s, a parent exits on Terminate at once, as
// Envoy's, even with a request in flight.
func TestHotRestartParentTerminatedAfterDrainExitsAtOnce(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(be.Close)
	t.Cleanup(func() { close(release) })
	path := writeBootstrap(t, t.TempDir(), drainBootstrap(t, netip.MustParseAddrPort(be.Listener.Addr().String())))
	opts, err := ParseArgs([]string{"-c", path, "--drain-time-s", "1", "--parent-shutdown-time-s", "1", "--drain-strategy", "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(opts, testutil.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	<-srv.Started()
	addr, ok := srv.ListenerAddr("web")
	if !ok {
		t.Fatal("listener web is not bound")
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-arrived
	restartParent{srv}.DrainListeners()
	time.Sleep(opts.ParentShutdownTime + 100*time.Millisecond)
	restartParent{srv}.Terminate()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a parent terminated after its parent shutdown time waited for its in-flight request")
	}
}
