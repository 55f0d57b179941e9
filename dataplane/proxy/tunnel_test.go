package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// connectServer is an HTTP/2 (prior knowledge) server that answers CONNECT with 200 and
// echoes the stream, reporting each CONNECT's :authority on authorities.
func connectServer(t *testing.T, authorities chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		authorities <- r.Host
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	})
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: h, Protocols: &protos}
	t.Cleanup(func() { _ = hs.Close() })
	go func() { _ = hs.Serve(ln) }()
	return ln.Addr().String()
}

// tcp_proxy with tunneling_config sends the connection inside an HTTP/2 CONNECT whose
// :authority is the hostname format rendered for it (istiod's connect_originate uses
// %DOWNSTREAM_LOCAL_ADDRESS%).
func TestTCPProxyTunnelingConfig(t *testing.T) {
	authorities := make(chan string, 1)
	upstream := connectServer(t, authorities)
	srv := newUnstartedForApply(t)
	cl := blackHoleCluster()
	cl.Name = "tunnel"
	cl.LoadAssignment = assignment("tunnel", netip.MustParseAddrPort(upstream))
	if err := srv.Apply(xdsclient.ClusterType, "1", []*anypb.Any{mustAnyT(t, cl)}); err != nil {
		t.Fatal(err)
	}
	tp := &tcpv3.TcpProxy{
		StatPrefix: "connect_originate", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "tunnel"},
		TunnelingConfig: &tcpv3.TcpProxy_TunnelingConfig{Hostname: "%DOWNSTREAM_LOCAL_ADDRESS%"},
	}
	l := &listenerv3.Listener{
		Name: "originate", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(t, tp)},
		}}}},
	}
	if err := srv.Apply(xdsclient.ListenerType, "1", []*anypb.Any{mustAnyT(t, l)}); err != nil {
		t.Fatal(err)
	}
	addr, _ := srv.listeners.Addr("originate")
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "inside the tunnel\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "inside the tunnel\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	select {
	case got := <-authorities:
		if got != addr.String() {
			t.Errorf(":authority = %s, want the downstream local address %s", got, addr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no CONNECT")
	}
}
