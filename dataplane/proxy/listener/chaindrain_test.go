package listener

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// echoServer echoes every line until the client closes.
func echoServer(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// lineConn is a client connection that sends a line and reads it back.
type lineConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, src string, to netip.AddrPort) *lineConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", to.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lineConn{c: c, br: bufio.NewReader(c)}
}

// echo reports whether a line went through and came back within a second.
func (l *lineConn) echo() bool {
	_ = l.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(l.c, "ping\n"); err != nil {
		return false
	}
	line, err := l.br.ReadString('\n')
	return err == nil && line == "ping\n"
}

// closed reports whether the proxy closed the connection within wait.
func (l *lineConn) closed(wait time.Duration) bool {
	_ = l.c.SetReadDeadline(time.Now().Add(wait))
	_, err := l.br.ReadByte()
	return err == io.EOF
}

// TestFilterChainOnlyUpdateDrainsOnlyTheChangedChain pins Envoy's in-place filter chain
// update: an LDS update that changes one filter chain closes the TCP connections of that
// chain when the drain time ends and leaves the others alone; an update outside the
// filter chains drains every connection of the listener.
func TestFilterChainOnlyUpdateDrainsOnlyTheChangedChain(t *testing.T) {
	st := stats.NewStore()
	cm := cluster.NewManager(st)
	t.Cleanup(cm.Close)
	cm.AddStatic([]*cluster.Config{staticCluster(t, "echo", echoServer(t), nil)})
	m := NewManager(Deps{Clusters: cm, Routes: httpconn.NewRouteStore(), Stats: st, Logger: testutil.Logger(t),
		DrainTime: 50 * time.Millisecond})
	t.Cleanup(m.Close)
	tcp := func(prefix string) []*listenerv3.Filter {
		return []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{
			TypedConfig: mustAny(t, &tcpv3.TcpProxy{StatPrefix: prefix, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "echo"}}),
		}}}
	}
	apply := func(port uint32, fromTwoPrefix string, inspector bool) netip.AddrPort {
		t.Helper()
		l := &listenerv3.Listener{Name: "l", Address: addr("127.0.0.1", port),
			FilterChains: []*listenerv3.FilterChain{{Name: "from-127.0.0.2", Filters: tcp(fromTwoPrefix),
				FilterChainMatch: &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("127.0.0.2", 32)}}}},
			DefaultFilterChain: &listenerv3.FilterChain{Name: "default", Filters: tcp("default")},
		}
		if inspector {
			l.ListenerFilters = tlsInspector(t)
		}
		cfg, err := Compile(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ApplyLDS([]*Config{cfg}); err != nil {
			t.Fatal(err)
		}
		a, _ := m.Addr("l")
		return a
	}
	at := apply(0, "v1", false)
	onDefault, onChanged := dialFrom(t, "127.0.0.1", at), dialFrom(t, "127.0.0.2", at)
	if !onDefault.echo() || !onChanged.echo() {
		t.Fatal("echo through both chains failed")
	}

	apply(0, "v2", false) // only the 127.0.0.2 chain changes
	if !onChanged.closed(2 * time.Second) {
		t.Error("the connection of the changed chain is still open after the drain time")
	}
	if !onDefault.echo() {
		t.Error("the connection of the unchanged default chain was closed by a filter-chain-only update")
	}

	apply(0, "v2", true) // a listener filter changes: the whole listener drains
	if !onDefault.closed(2 * time.Second) {
		t.Error("a listener-level update left a connection open after the drain time")
	}
}

// TestFinishDoesNotWaitForTCPProxyConnections pins what Finish waits for: the HTTP
// connections' requests, not a tcp_proxy connection, which no drain ends (Close cuts it,
// as Envoy's exit does).
func TestFinishDoesNotWaitForTCPProxyConnections(t *testing.T) {
	st := stats.NewStore()
	cm := cluster.NewManager(st)
	t.Cleanup(cm.Close)
	cm.AddStatic([]*cluster.Config{staticCluster(t, "echo", echoServer(t), nil)})
	m := NewManager(Deps{Clusters: cm, Routes: httpconn.NewRouteStore(), Stats: st, Logger: testutil.Logger(t),
		DrainTime: time.Minute})
	t.Cleanup(m.Close)
	cfg, err := Compile(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "echo")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyLDS([]*Config{cfg}); err != nil {
		t.Fatal(err)
	}
	at, _ := m.Addr("l")
	c := dialFrom(t, "127.0.0.1", at)
	if !c.echo() {
		t.Fatal("echo through tcp_proxy failed")
	}
	done := make(chan struct{})
	go func() { defer close(done); m.Finish(time.Now().Add(time.Minute)) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Finish waited for a tcp_proxy connection")
	}
	if !c.echo() {
		t.Error("Finish closed the tcp_proxy connection; Close does that")
	}
}
