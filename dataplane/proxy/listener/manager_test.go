package listener

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

func httpGet(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// TestLDSUpdatesKeepTheSocketAndRemovalClosesIt pins the listener manager's state of the
// world: same address keeps the bound socket with the new filter chains; a listener absent
// from the update stops accepting; a bind failure changes nothing.
func TestLDSUpdatesKeepTheSocketAndRemovalClosesIt(t *testing.T) {
	store := stats.NewStore()
	m := NewManager(Deps{Clusters: cluster.NewManager(store), Routes: httpconn.NewRouteStore(), Stats: store, Logger: testutil.Logger(t)})
	t.Cleanup(m.Close)
	mk := func(body string) *Config {
		cfg, err := Compile(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1", 0),
			FilterChains: []*listenerv3.FilterChain{{Filters: directHCM(t, "l", body)}}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := m.ApplyLDS([]*Config{mk("v1")}); err != nil {
		t.Fatal(err)
	}
	a1, _ := m.Addr("l")
	if got := httpGet(t, a1.String()); got != "v1" {
		t.Fatalf("v1 body %q", got)
	}
	if err := m.ApplyLDS([]*Config{mk("v2")}); err != nil {
		t.Fatal(err)
	}
	a2, _ := m.Addr("l")
	if a1 != a2 {
		t.Errorf("socket changed from %s to %s on an update that kept the address", a1, a2)
	}
	if got := httpGet(t, a2.String()); got != "v2" {
		t.Errorf("after update body %q, want v2", got)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := uint32(busy.Addr().(*net.TCPAddr).Port)
	clash, err := Compile(&listenerv3.Listener{Name: "clash", Address: addr("127.0.0.1", port),
		FilterChains: []*listenerv3.FilterChain{{Filters: directHCM(t, "c", "c")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyLDS([]*Config{clash}); err == nil {
		t.Error("binding a busy port must fail the update")
	}
	if got := httpGet(t, a2.String()); got != "v2" {
		t.Errorf("a failed update changed the running listener: %q", got)
	}

	if err := m.ApplyLDS(nil); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", a2.String()); err == nil {
		c.Close()
		t.Error("removed listener still accepts")
	}
	if store.Value("listener_manager.total_listeners_active") != 0 {
		t.Error("total_listeners_active not updated")
	}
}

// TestLDSUpdateDrainsConnectionsOfTheReplacedListener: a kept-alive connection answers
// its next request under the configuration it was accepted with, then closes (Envoy drains
// the connections of a replaced listener), so the client's next connection gets the new
// configuration. Re-applying an identical listener drains nothing.
func TestLDSUpdateDrainsConnectionsOfTheReplacedListener(t *testing.T) {
	store := stats.NewStore()
	m := NewManager(Deps{Clusters: cluster.NewManager(store), Routes: httpconn.NewRouteStore(), Stats: store, Logger: testutil.Logger(t)})
	t.Cleanup(m.Close)
	mk := func(body string) *Config {
		cfg, err := Compile(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1", 0),
			FilterChains: []*listenerv3.FilterChain{{Filters: directHCM(t, "l", body)}}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := m.ApplyLDS([]*Config{mk("v1")}); err != nil {
		t.Fatal(err)
	}
	a, _ := m.Addr("l")
	conn, err := net.Dial("tcp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	get := func() (string, bool) {
		t.Helper()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return string(body), resp.Close
	}
	if body, closing := get(); body != "v1" || closing {
		t.Fatalf("first request: %q close=%v, want v1 kept alive", body, closing)
	}
	if err := m.ApplyLDS([]*Config{mk("v1")}); err != nil {
		t.Fatal(err)
	}
	if body, closing := get(); body != "v1" || closing {
		t.Fatalf("after an identical update: %q close=%v, want v1 kept alive", body, closing)
	}
	if err := m.ApplyLDS([]*Config{mk("v2")}); err != nil {
		t.Fatal(err)
	}
	// The idle connection is closed by the drain, or (racing it) answers once more under
	// v1 with Connection: close; it never serves v2.
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
		if resp, err := http.ReadResponse(r, nil); err == nil {
			body, _ := io.ReadAll(resp.Body)
			if string(body) != "v1" || !resp.Close {
				t.Errorf("old connection after the update: %q close=%v, want closed or v1 with Connection: close", body, resp.Close)
			}
		}
	}
	if got := httpGet(t, a.String()); got != "v2" {
		t.Errorf("new connection after the update: %q, want v2", got)
	}
}
