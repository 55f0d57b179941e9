package listener

import (
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	httpinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	tlsinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

// excludePorts is Istio's listenerPredicateExcludePorts: the inspector is disabled on
// the listed destination ports.
func excludePorts(ports ...int32) *listenerv3.ListenerFilterChainMatchPredicate {
	var rules []*listenerv3.ListenerFilterChainMatchPredicate
	for _, p := range ports {
		rules = append(rules, &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange{
			DestinationPortRange: &typev3.Int32Range{Start: p, End: p + 1}}})
	}
	if len(rules) == 1 {
		return rules[0]
	}
	return &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_OrMatch{
		OrMatch: &listenerv3.ListenerFilterChainMatchPredicate_MatchSet{Rules: rules}}}
}

func TestFilterDisabledSkipsTheInspectorOnMatchingPorts(t *testing.T) {
	l := baseListener(t)
	l.ListenerFilters = []*listenerv3.ListenerFilter{
		{Name: tlsctx.InspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspv3.TlsInspector{
			InitialReadBufferSize: wrapperspb.UInt32(512)})}, FilterDisabled: excludePorts(3306, 5432)},
		{Name: HTTPInspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &httpinspv3.HttpInspector{})},
			FilterDisabled: &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_NotMatch{
				NotMatch: excludePorts(8080)}}},
	}
	cfg, err := Compile(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		port     uint16
		wantALPN bool
	}{
		{port: 8080, wantALPN: true}, // http_inspector on only for 8080
		{port: 9090, wantALPN: false},
	} {
		client, server := net.Pipe()
		go func() {
			_, _ = io.WriteString(client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		}()
		ci, conn := inspect(cfg, server, ConnInfo{Local: mustAddrPort(t, "10.0.0.1", tc.port)})
		if got := len(ci.ALPN) > 0; got != tc.wantALPN {
			t.Errorf("port %d: http_inspector ran = %v, want %v (ALPN %v)", tc.port, got, tc.wantALPN, ci.ALPN)
		}
		_ = conn.Close()
		_ = client.Close()
	}
	for port, want := range map[uint16]bool{3306: true, 5432: true, 3307: false} {
		if got := cfg.TLSInspectorOff.Matches(port); got != want {
			t.Errorf("tls_inspector disabled on %d = %v, want %v", port, got, want)
		}
	}
}

func TestListenerAccessLogRecordsConnectionsWithNoFilterChain(t *testing.T) {
	ca := tlstest.NewCA(t)
	p := newProxyUnderTest(t, ca, backendID)
	path := filepath.Join(t.TempDir(), "listener.log")
	to, _ := p.listen(t, &listenerv3.Listener{Name: "virtualInbound", Address: addr("127.0.0.1", 0),
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file",
			Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
				ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"NR"}}}},
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{Path: path})}}},
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(1),
		FilterChains: []*listenerv3.FilterChain{{Name: "only-port-1",
			FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(1)}, Filters: tcpFilter(t, "none")}},
	})
	c, err := net.Dial("tcp", to.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if line := string(b); strings.Contains(line, " NR ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listener access log %q has no NR entry", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTransportSocketConnectTimeoutClosesAStalledHandshake(t *testing.T) {
	ca := tlstest.NewCA(t)
	p := newProxyUnderTest(t, ca, backendID)
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext: tlstest.IstioCommon([]string{"istio"}, tlstest.Prefix("spiffe://cluster.local/")),
	})
	to, cfg := p.listen(t, &listenerv3.Listener{Name: "gw", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Name: "tls", TransportSocket: down,
			TransportSocketConnectTimeout: durationpb.New(100 * time.Millisecond), Filters: tcpFilter(t, "none")}},
	})
	c, err := net.Dial("tcp", to.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	// No ClientHello is ever sent: the proxy gives up after the timeout.
	if _, err := io.ReadAll(c); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("connection closed after %v, want about 100ms", d)
	}
	waitStat(t, p.stats, "listener."+cfg.StatName+".downstream_cx_transport_socket_connect_timeout", 1)
}

func mustAddrPort(t *testing.T, ip string, port uint16) netip.AddrPort {
	t.Helper()
	return netip.AddrPortFrom(netip.MustParseAddr(ip), port)
}

// TestHTTPInspectorGivesUpOnBytesNoRequestStartsWith holds the HTTP inspector to
// Envoy's: bytes that cannot start a request line are not HTTP at once, without waiting
// for a line end (a client-first protocol on a sniffed port sends "hello" and waits),
// and every byte still reaches the chain.
func TestHTTPInspectorGivesUpOnBytesNoRequestStartsWith(t *testing.T) {
	l := baseListener(t)
	l.ListenerFilters = []*listenerv3.ListenerFilter{
		{Name: HTTPInspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &httpinspv3.HttpInspector{})}},
	}
	cfg, err := Compile(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, send string
		want       []string
	}{
		{name: "lower-case bytes", send: "hello", want: nil},
		{name: "binary", send: "\x00\x01\x02", want: nil},
		{name: "upper-case word then a non-method byte", send: "PING\r", want: nil},
		{name: "an overlong method", send: strings.Repeat("A", 21), want: nil},
		{name: "HTTP/1.1 request", send: "GET / HTTP/1.1\r\n", want: []string{"http/1.1"}},
		{name: "HTTP/1.0 request", send: "M-SEARCH * HTTP/1.0\r\n", want: []string{"http/1.0"}},
		{name: "h2c preface", send: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", want: []string{"h2c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() { _, _ = io.WriteString(client, tc.send) }() // and no more: a line end never comes
			done := make(chan struct{})
			var ci ConnInfo
			var conn net.Conn
			go func() {
				defer close(done)
				ci, conn = inspect(cfg, server, ConnInfo{Local: mustAddrPort(t, "10.0.0.1", 9000)})
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = server.Close()
				<-done
				t.Fatalf("inspector still waiting for more of %q", tc.send)
			}
			defer conn.Close()
			if !slices.Equal(ci.ALPN, tc.want) {
				t.Errorf("ALPN %v, want %v", ci.ALPN, tc.want)
			}
			got := make([]byte, len(tc.send))
			if _, err := io.ReadFull(conn, got); err != nil || string(got) != tc.send {
				t.Errorf("chain reads %q (%v), want %q", got, err, tc.send)
			}
		})
	}
}
