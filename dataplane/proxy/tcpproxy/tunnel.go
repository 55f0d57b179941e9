package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"golang.org/x/net/http2"

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
}

func compileTunnel(tc *tcpv3.TcpProxy_TunnelingConfig) (*Tunnel, error) {
	if tc == nil {
		return nil, nil
	}
	h, err := accesslog.CompileFormatString(tc.GetHostname())
	if err != nil {
		return nil, fmt.Errorf("tunneling_config.hostname: %w", err)
	}
	return &Tunnel{Hostname: h}, nil
}

// errTunnelRefused is a non-2xx answer to the CONNECT.
var errTunnelRefused = errors.New("tunnel refused")

// open sends the CONNECT on up and returns the stream as a connection.
//
//nolint:staticcheck // SA1019: x/net/http2's ClientConn serves one dialled connection, which net/http cannot
func (t *Tunnel) open(ctx context.Context, up net.Conn, info *accesslog.Info) (net.Conn, error) {
	authority := t.Hostname.Render(info)
	cc, err := (&http2.Transport{}).NewClientConn(up)
	if err != nil {
		return nil, fmt.Errorf("tunnel to %s: %w", authority, err)
	}
	pr, pw := io.Pipe()
	req := (&http.Request{
		Method: http.MethodConnect, URL: &url.URL{Host: authority}, Host: authority,
		Header: http.Header{}, Body: pr, ContentLength: -1,
	}).WithContext(context.WithoutCancel(ctx))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		_ = pw.Close()
		_ = cc.Close()
		return nil, fmt.Errorf("tunnel to %s: %w", authority, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = pw.Close()
		_ = resp.Body.Close()
		_ = cc.Close()
		return nil, fmt.Errorf("tunnel to %s: %w: %s", authority, errTunnelRefused, resp.Status)
	}
	return &tunnelConn{Conn: up, w: pw, r: resp.Body, cc: cc}, nil
}

// tunnelConn is a CONNECT stream as a net.Conn: Read and Write carry the stream's DATA,
// CloseWrite ends the request stream (the peer's half-close), Close ends the stream and
// its HTTP/2 connection. Addresses and deadlines are the underlying connection's.
type tunnelConn struct {
	net.Conn
	w    *io.PipeWriter
	r    io.ReadCloser
	cc   *http2.ClientConn //nolint:staticcheck // see open
	once sync.Once
}

func (c *tunnelConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *tunnelConn) Write(b []byte) (int, error) { return c.w.Write(b) }

// CloseWrite half-closes the tunnel.
func (c *tunnelConn) CloseWrite() error { return c.w.Close() }

func (c *tunnelConn) Close() error {
	c.once.Do(func() {
		_ = c.w.CloseWithError(errors.New("tunnel closed"))
		_ = c.r.Close()
		_ = c.cc.Close()
		_ = c.Conn.Close()
	})
	return nil
}
