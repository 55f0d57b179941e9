package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// withWebsocket gives every HCM of the snapshot's listeners Istio's upgrade_configs.
func withWebsocket(t *testing.T, snap map[resource.Type][]cachetypes.Resource) map[resource.Type][]cachetypes.Resource {
	t.Helper()
	for _, r := range snap[resource.ListenerType] {
		for _, fc := range r.(*listenerv3.Listener).GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var h hcmv3.HttpConnectionManager
				if f.GetTypedConfig().MessageName() != "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
					continue
				}
				if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
					t.Fatal(err)
				}
				h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
				a, err := anypb.New(&h)
				if err != nil {
					t.Fatal(err)
				}
				f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
			}
		}
	}
	return snap
}

// TestWebsocketThroughTheSidecarPair: app A's websocket handshake goes through sidecar A
// (outbound HCM) and sidecar B (inbound HCM) to app B, which answers 101; then raw bytes
// flow both ways through both sidecars until the client closes.
func TestWebsocketThroughTheSidecarPair(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		buf := make([]byte, 512)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				_, _ = conn.Write([]byte("B:" + string(buf[:n])))
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(app.Close)
	appAddr := netip.MustParseAddrPort(app.Listener.Addr().String())
	x := startXDS(t)
	boot := writeBootstrap(t, t.TempDir(), testBootstrap(x.socket))
	const nodeB = "sidecar~127.0.0.1~backend-0.default~default.svc.cluster.local"
	x.set(nodeB, "1", withWebsocket(t, sidecarSnapshot(t, netip.AddrPort{}, uint32(appAddr.Port()))))
	b := newTestServer(t, boot, nodeB, fixedOriginalDst(appAddr))
	eventually(t, "B LIVE", func() bool { c, _ := adminGet(t, b, "/ready"); return c == 200 })
	bIn, _ := b.ListenerAddr("virtualInbound")
	const nodeA = "sidecar~127.0.0.1~web-0.default~default.svc.cluster.local"
	x.set(nodeA, "1", withWebsocket(t, sidecarSnapshot(t, bIn, 0)))
	a := newTestServer(t, boot, nodeA, fixedOriginalDst(netip.MustParseAddrPort("10.96.0.10:8080")))
	eventually(t, "A LIVE", func() bool { c, _ := adminGet(t, a, "/ready"); return c == 200 })
	aOut, _ := a.ListenerAddr("virtualOutbound")

	c, err := net.Dial("tcp", aOut.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: backend:8080\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d through the sidecar pair, want 101", resp.StatusCode)
	}
	for _, msg := range []string{"hello", "again"} {
		_, _ = io.WriteString(c, msg)
		got := make([]byte, len("B:")+len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "B:"+msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the client's close: %q, %v", rest, err)
	}
}
