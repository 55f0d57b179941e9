package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
)

// Tunnel is tcp_proxy's tunneling_config: the connection's bytes go upstream inside an
// HTTP/2 CONNECT stream whose :authority is Hostname rendered for the connection (for
// istiod's connect_originate, %DOWNSTREAM_LOCAL_ADDRESS%: the original destination).
// The cluster's own transport (mTLS, ALPN h2) carries the HTTP/2 connection, one per
// downstream connection; an answer other than 2xx fails the connection as a connect
// failure (UF), as Envoy's tunnel does.
type Tunnel struct {
	Hostname *accesslog.FormatString
	// Headers are headers_to_add: headers of the CONNECT request, each value a format
	// string rendered for the connection, applied in order.
	Headers []TunnelHeader
}

// TunnelHeader is one of tunneling_config's headers_to_add.
type TunnelHeader struct {
	Name   string // canonical
	Value  *accesslog.FormatString
	Action corev3.HeaderValueOption_HeaderAppendAction
	// KeepEmpty is keep_empty_value: a value that renders empty is still sent (else
	// the header is skipped, as Envoy's header parser does).
	KeepEmpty bool
}

func compileTunnel(tc *tcpv3.TcpProxy_TunnelingConfig) (*Tunnel, error) {
	if tc == nil {
		return nil, nil
	}
	h, err := accesslog.CompileFormatString(tc.GetHostname())
	if err != nil {
		return nil, fmt.Errorf("tunneling_config.hostname: %w", err)
	}
	t := &Tunnel{Hostname: h}
	for i, o := range tc.GetHeadersToAdd() {
		v, err := accesslog.CompileFormatString(o.GetHeader().GetValue())
		if err != nil {
			return nil, fmt.Errorf("tunneling_config.headers_to_add[%d].header.value: %w", i, err)
		}
		name := strings.ToLower(o.GetHeader().GetKey())
		if strings.HasPrefix(name, ":") || name == "host" {
			return nil, fmt.Errorf("tunneling_config.headers_to_add[%d].header.key: %s cannot be set", i, name)
		}
		t.Headers = append(t.Headers, TunnelHeader{Name: http.CanonicalHeaderKey(name), Value: v,
			Action: o.GetAppendAction(), KeepEmpty: o.GetKeepEmptyValue()})
	}
	return t, nil
}

// header renders the CONNECT request's headers for info.
func (t *Tunnel) header(info *accesslog.Info) http.Header {
	h := http.Header{}
	for _, th := range t.Headers {
		v := th.Value.RenderHeader(info)
		if v == "" && !th.KeepEmpty {
			continue
		}
		_, exists := h[th.Name]
		switch th.Action {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			h[th.Name] = append(h[th.Name], v)
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !exists {
				h[th.Name] = []string{v}
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			h[th.Name] = []string{v}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if exists {
				h[th.Name] = []string{v}
			}
		}
	}
	return h
}

// errTunnelRefused is a non-2xx answer to the CONNECT.
var errTunnelRefused = errors.New("tunnel refused")

// open sends the CONNECT on up and returns the stream as a connection.
func (t *Tunnel) open(ctx context.Context, up net.Conn, info *accesslog.Info) (net.Conn, error) {
	authority := t.Hostname.Render(info)
	stop := context.AfterFunc(ctx, func() { _ = up.Close() }) // the connection ended before the answer
	st, status, err := openH2Stream(up, authority, t.header(info))
	stop()
	if err != nil {
		return nil, fmt.Errorf("tunnel to %s: %w", authority, err)
	}
	if status < 200 || status > 299 {
		_ = st.Close()
		return nil, fmt.Errorf("tunnel to %s: %w: %d %s", authority, errTunnelRefused, status, http.StatusText(status))
	}
	return &tunnelConn{Conn: up, s: st}, nil
}

// tunnelConn is a CONNECT stream as a net.Conn: Read and Write carry the stream's DATA,
// CloseWrite ends the request stream (the peer's half-close), Close ends the stream and
// its HTTP/2 connection. Addresses and deadlines are the underlying connection's.
type tunnelConn struct {
	net.Conn
	s *h2Stream
}

func (c *tunnelConn) Read(b []byte) (int, error)  { return c.s.Read(b) }
func (c *tunnelConn) Write(b []byte) (int, error) { return c.s.Write(b) }

// CloseWrite half-closes the tunnel.
func (c *tunnelConn) CloseWrite() error { return c.s.CloseWrite() }

func (c *tunnelConn) Close() error { return c.s.Close() }
