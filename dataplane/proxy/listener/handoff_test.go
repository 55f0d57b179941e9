package listener

import (
	"net"
	"net/netip"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestHotRestartSocketHandoff pins the listener manager's side of hot restart: the
// parent hands out a duplicate of its bound socket by address, the child adopts it
// instead of binding (which would fail: the port is taken) and, with DeferAccept,
// accepts only after StartWorkers, while the parent keeps serving the shared queue.
func TestHotRestartSocketHandoff(t *testing.T) {
	newManager := func(deps Deps) *Manager {
		store := stats.NewStore()
		deps.Clusters, deps.Routes, deps.Stats, deps.Logger = cluster.NewManager(store), httpconn.NewRouteStore(), store, testutil.Logger(t)
		m := NewManager(deps)
		t.Cleanup(m.Close)
		return m
	}
	cfg := func(port uint16, body string) *Config {
		c, err := Compile(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1", uint32(port)),
			FilterChains: []*listenerv3.FilterChain{{Filters: directHCM(t, "l", body)}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	parent := newManager(Deps{})
	if err := parent.AddStatic([]*Config{cfg(0, "parent")}); err != nil {
		t.Fatal(err)
	}
	bound, _ := parent.Addr("l")
	if f := parent.SocketFile(netip.MustParseAddrPort("127.0.0.1:1")); f != nil {
		t.Error("SocketFile returned a socket for an address no listener has")
	}
	var asked []netip.AddrPort
	child := newManager(Deps{DeferAccept: true, InheritSocket: func(a netip.AddrPort) net.Listener {
		asked = append(asked, a)
		f := parent.SocketFile(a)
		if f == nil {
			return nil
		}
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			t.Errorf("adopt: %v", err)
			return nil
		}
		return ln
	}})
	if err := child.AddStatic([]*Config{cfg(bound.Port(), "child")}); err != nil {
		t.Fatalf("child could not take over %s: %v", bound, err)
	}
	if len(asked) != 1 || asked[0] != bound {
		t.Errorf("InheritSocket asked for %v, want [%s]", asked, bound)
	}
	// Not started: every connection goes to the parent.
	for range 5 {
		if got := httpGet(t, bound.String()); got != "parent" {
			t.Fatalf("before StartWorkers a connection was served by %q", got)
		}
	}
	child.StartWorkers()
	parent.StopListeners(false)
	deadline := time.Now().Add(5 * time.Second)
	for httpGet(t, bound.String()) != "child" {
		if time.Now().After(deadline) {
			t.Fatal("the child never served on the adopted socket")
		}
	}
	if f := parent.SocketFile(bound); f != nil {
		_ = f.Close()
		t.Error("a stopped listener still hands out its socket")
	}
}
