package httpconn

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
)

// maxStreamID is HTTP/2's largest stream id, the last stream id of Envoy's first
// (graceful) GOAWAY.
const maxStreamID = 1<<31 - 1

// frameConn wraps the connection an HTTP/2 server writes to and follows the frame
// boundaries in what it writes, so a GOAWAY frame of the proxy's own can be put between
// two of the server's frames (Envoy's drain sequence sends a first GOAWAY with last stream
// id 2^31-1 before the server's real one).
type frameConn struct {
	net.Conn
	mu      sync.Mutex
	hdr     [9]byte
	hdrLen  int    // bytes of the current frame header seen
	left    uint32 // payload bytes of the current frame still to come
	pending []byte // a frame to write at the next boundary
	started bool   // the server's first frame (its SETTINGS) is written
}

// atBoundary reports whether the bytes written so far end on a frame boundary after the
// server's first frame, where a frame of the proxy's own may go.
func (c *frameConn) atBoundary() bool { return c.started && c.hdrLen == 0 && c.left == 0 }

// Write passes p through, writing a pending frame at the first frame boundary.
func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	written := 0
	for len(p) > 0 {
		if c.atBoundary() && c.pending != nil {
			if _, err := c.Conn.Write(c.pending); err != nil {
				return written, err
			}
			c.pending = nil
		}
		var n int
		if c.hdrLen < len(c.hdr) {
			n = copy(c.hdr[c.hdrLen:], p)
			c.hdrLen += n
			if c.hdrLen == len(c.hdr) {
				c.left = uint32(c.hdr[0])<<16 | uint32(c.hdr[1])<<8 | uint32(c.hdr[2])
				if c.left == 0 {
					c.hdrLen, c.started = 0, true
				}
			}
		} else {
			n = int(min(uint32(len(p)), c.left))
			c.left -= uint32(n)
			if c.left == 0 {
				c.hdrLen, c.started = 0, true
			}
		}
		m, err := c.Conn.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	if c.atBoundary() && c.pending != nil {
		if _, err := c.Conn.Write(c.pending); err != nil {
			return written, err
		}
		c.pending = nil
	}
	return written, nil
}

// GoAway sends a GOAWAY frame (NO_ERROR) with lastStreamID now when no frame is half
// written, else right after the frame being written.
func (c *frameConn) GoAway(lastStreamID uint32) error {
	f := make([]byte, 17)
	f[2] = 8   // payload length
	f[3] = 0x7 // GOAWAY
	binary.BigEndian.PutUint32(f[9:], lastStreamID&maxStreamID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.atBoundary() {
		c.pending = f
		return nil
	}
	_, err := c.Conn.Write(f)
	return err
}

// tlsFrameConn is a frameConn over TLS: the HTTP/2 server sees the TLS state through
// ConnectionState.
type tlsFrameConn struct {
	*frameConn
	cs connectionStater
}

type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

// ConnectionState returns the TLS state of the underlying connection.
func (c tlsFrameConn) ConnectionState() tls.ConnectionState { return c.cs.ConnectionState() }
