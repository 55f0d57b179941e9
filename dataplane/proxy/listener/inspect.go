package listener

import (
	"bytes"
	"net"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// h2Preface starts every HTTP/2 connection with prior knowledge (h2c).
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// inspect runs the listener filters that look at the first bytes (tls_inspector, then
// http_inspector when the connection is not TLS) and returns what they found and a
// connection that still yields every byte.
func inspect(cfg *Config, conn net.Conn, ci ConnInfo) (ConnInfo, net.Conn) {
	ci.TransportProtocol = "raw_buffer"
	deadline := time.Time{}
	if cfg.FiltersTimeout > 0 {
		deadline = time.Now().Add(cfg.FiltersTimeout)
	}
	if cfg.TLSInspector && !cfg.TLSInspectorOff.Matches(ci.Local.Port()) {
		var h tlsctx.Hello
		h, conn = tlsctx.Inspect(conn, deadline)
		if h.TLS {
			ci.TransportProtocol, ci.ServerName, ci.ALPN = "tls", h.ServerName, h.ALPN
			return ci, conn
		}
	}
	if cfg.HTTPInspector && !cfg.HTTPInspectorOff.Matches(ci.Local.Port()) {
		var proto string
		proto, conn = sniffHTTP(conn, deadline)
		if proto != "" {
			ci.ALPN = []string{proto}
		}
	}
	return ci, conn
}

// sniffHTTP reads up to the end of the first line and reports "h2c" for the HTTP/2
// preface, "http/1.1" or "http/1.0" for an HTTP/1.x request line, or "" otherwise, as
// Envoy's http_inspector does. As Envoy's parser, it gives up as soon as the bytes
// cannot start a request (a method is upper-case letters and '-', then a space), so a
// client-first protocol that sends a short message without a line end and waits for
// the answer is not held until a line end that never comes.
func sniffHTTP(conn net.Conn, deadline time.Time) (string, net.Conn) {
	_ = conn.SetReadDeadline(deadline)
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	var buf []byte
	tmp := make([]byte, 512)
	proto := ""
	for len(buf) < 4096 {
		if len(buf) > 0 && !bytes.HasPrefix(h2Preface, buf[:min(len(buf), len(h2Preface))]) {
			if !mayStartRequest(buf) {
				break
			}
			if i := bytes.IndexByte(buf, '\n'); i >= 0 {
				line := bytes.TrimRight(buf[:i], "\r")
				switch {
				case bytes.HasSuffix(line, []byte(" HTTP/1.1")):
					proto = "http/1.1"
				case bytes.HasSuffix(line, []byte(" HTTP/1.0")):
					proto = "http/1.0"
				}
				break
			}
		} else if len(buf) >= len(h2Preface) {
			proto = "h2c"
			break
		}
		n, err := conn.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			break
		}
	}
	return proto, tlsctx.NewPrefixConn(conn, buf)
}

// maxMethodLen bounds an HTTP method: llhttp's longest is "BASELINE-CONTROL" (16).
const maxMethodLen = 20

// mayStartRequest reports whether buf can be the start of an HTTP/1.x request line: a
// method of upper-case letters and '-' followed by a space.
func mayStartRequest(buf []byte) bool {
	for i, c := range buf {
		switch {
		case c == ' ':
			return i > 0
		case i >= maxMethodLen:
			return false
		case c >= 'A' && c <= 'Z' || c == '-':
		default:
			return false
		}
	}
	return true
}
