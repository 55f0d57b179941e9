package tlsctx

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// InspectorName is the listener filter that detects TLS, SNI and ALPN.
const InspectorName = "envoy.filters.listener.tls_inspector"

// Hello is what the TLS inspector learnt from a connection's first bytes.
type Hello struct {
	TLS        bool     // a ClientHello was seen: transport protocol "tls"
	ServerName string   // SNI
	ALPN       []string // the client's application protocols
}

var errGotHello = errors.New("client hello captured")

// Inspect reads conn's first bytes until it knows whether they are a TLS ClientHello, as
// Envoy's tls_inspector does, and returns what it saw and a connection that replays the
// bytes read, so nothing is consumed. It gives up (not TLS) at deadline.
func Inspect(conn net.Conn, deadline time.Time) (Hello, net.Conn) {
	_ = conn.SetReadDeadline(deadline)
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	rec := &recordingConn{Conn: conn}
	first := make([]byte, 1)
	if _, err := io.ReadFull(rec, first); err != nil || first[0] != 0x16 { // handshake record
		return Hello{}, rec.replay()
	}
	rec.pending = rec.buf.Bytes() // the throwaway server reads the first byte again
	var h Hello
	srv := tls.Server(rec, &tls.Config{
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			h = Hello{TLS: true, ServerName: chi.ServerName, ALPN: append([]string(nil), chi.SupportedProtos...)}
			return nil, errGotHello
		},
	})
	_ = srv.Handshake()
	return h, rec.replay()
}

// recordingConn records what is read and swallows what the throwaway TLS server writes.
type recordingConn struct {
	net.Conn
	buf     bytes.Buffer
	pending []byte // recorded bytes to read again before reading Conn
}

func (r *recordingConn) Read(p []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func (r *recordingConn) Write(p []byte) (int, error) { return len(p), nil }

func (r *recordingConn) replay() net.Conn {
	return &PrefixConn{Conn: r.Conn, prefix: r.buf.Bytes()}
}

// PrefixConn is a connection whose first reads return bytes already read from it.
type PrefixConn struct {
	net.Conn
	prefix []byte
}

// NewPrefixConn returns conn with prefix put back in front of its unread bytes.
func NewPrefixConn(conn net.Conn, prefix []byte) *PrefixConn {
	return &PrefixConn{Conn: conn, prefix: prefix}
}

// Read returns the replayed bytes first.
func (p *PrefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// Buffered returns how many replayed bytes are still to be read.
func (p *PrefixConn) Buffered() int { return len(p.prefix) }

// PassThrough returns the connection under the replayed bytes: past Buffered, reads and
// writes are its own (rawio reads it directly).
func (p *PrefixConn) PassThrough() net.Conn { return p.Conn }

// CloseWrite half-closes the underlying connection when it supports it.
func (p *PrefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
