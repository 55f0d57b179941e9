package httpconn

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// wsEcho is a backend that accepts any upgrade with 101 and then echoes raw bytes,
// upper-cased, until the client closes its half.
func wsEcho(t *testing.T) string {
	t.Helper()
	return backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !connectionHas(r.Header, "upgrade") {
			http.Error(w, "not an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: test\r\n\r\n")
		brw.Flush()
		buf := make([]byte, 1024)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				conn.Write([]byte(strings.ToUpper(string(buf[:n]))))
			}
			if err != nil {
				return
			}
		}
	})
}

func upgradeRequest(t *testing.T, addr string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /chat HTTP/1.1\r\nHost: ws\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

func TestWebsocketUpgradeTunnelsRawBytesBothWays(t *testing.T) {
	up := wsEcho(t)
	l := newLabHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
	}, []*cluster.Config{staticCluster(t, "ws", up)}, routeTo(prefix("/"), to("ws")))
	c, br, resp := upgradeRequest(t, l.addr)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status = %d, want 101", resp.StatusCode)
	}
	if resp.Header.Get("Sec-Websocket-Accept") != "test" || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		t.Errorf("101 headers = %v", resp.Header)
	}
	for _, msg := range []string{"hello", "second frame"} {
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("read echo of %q: %v", msg, err)
		}
		if string(got) != strings.ToUpper(msg) {
			t.Errorf("echo = %q, want %q", got, strings.ToUpper(msg))
		}
	}
	// The client's half-close reaches the backend, which ends the stream.
	c.(*net.TCPConn).CloseWrite()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after close: %q, %v", rest, err)
	}
	// The entry is written once the tunnel is torn down, after the client saw the end.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(l.logPath)
		if strings.Contains(string(b), " 101 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log %q does not log the 101", b)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestUpgradeWithoutUpgradeConfigsIsForbidden(t *testing.T) {
	up := wsEcho(t)
	for _, tc := range []struct {
		name  string
		hcm   func(*hcmv3.HttpConnectionManager)
		route func(*routev3.RouteAction)
		want  int
	}{
		{name: "no upgrade_configs", want: http.StatusForbidden},
		{name: "disabled on the HCM", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket", Enabled: wrapperspb.Bool(false)}}
		}, want: http.StatusForbidden},
		{name: "disabled on the HCM, enabled on the route", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket", Enabled: wrapperspb.Bool(false)}}
		}, route: func(a *routev3.RouteAction) {
			a.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "WebSocket", Enabled: wrapperspb.Bool(true)}}
		}, want: http.StatusSwitchingProtocols},
		{name: "enabled on the HCM, disabled on the route", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
		}, route: func(a *routev3.RouteAction) {
			a.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "websocket", Enabled: wrapperspb.Bool(false)}}
		}, want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := to("ws")
			if tc.route != nil {
				tc.route(a)
			}
			l := newLabHCM(t, tc.hcm, []*cluster.Config{staticCluster(t, "ws", up)}, routeTo(prefix("/"), a))
			_, _, resp := upgradeRequest(t, l.addr)
			if resp.StatusCode != tc.want {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestUpgradeConfigOtherThanWebsocketOrConnectIsRefused(t *testing.T) {
	err := (&Config{}).compileStreamOptions(&hcmv3.HttpConnectionManager{
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "spdy/3"}}})
	if err == nil || !strings.Contains(err.Error(), "upgrade_configs[0].upgrade_type") {
		t.Errorf("err = %v, want the spdy/3 upgrade refused by name", err)
	}
	// CONNECT needs routes that terminate it, known when the HCM compiles.
	cfg := &Config{}
	if err := cfg.compileStreamOptions(&hcmv3.HttpConnectionManager{
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}}}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.checkConnectRoutes(); err == nil || !strings.Contains(err.Error(), "inline route_config") {
		t.Errorf("CONNECT with routes from RDS: err = %v, want it refused by name", err)
	}
}
