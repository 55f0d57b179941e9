package listener

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzSniffHTTP feeds the HTTP inspector any first bytes of a connection: it must
// return (the client closes after them), hand every byte on to the chain, and report
// HTTP only for bytes that start a request line its way.
func FuzzSniffHTTP(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "POST /a HTTP/1.0\n", "M-SEARCH * HTTP/1.1\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "PRI * HTTP/2.0\r\n", "hello world\n", "PING\r\n",
		"\x16\x03\x01\x00", "", " GET / HTTP/1.1\r\n", "GET", "GET / HTTP/1.1",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		proto, conn := sniffHTTP(&bytesConn{r: bytes.NewReader(data)}, time.Now().Add(5*time.Second))
		got, err := io.ReadAll(conn)
		_ = conn.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("chain reads %q (%v), want %q", got, err, data)
		}
		line, _, _ := bytes.Cut(data, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		method, _, _ := bytes.Cut(data, []byte(" "))
		switch proto {
		case "":
		case "h2c":
			if !bytes.HasPrefix(data, h2Preface) {
				t.Fatalf("%q: h2c without the preface", data)
			}
		case "http/1.1", "http/1.0":
			if !bytes.HasSuffix(line, []byte(" HTTP/"+proto[len("http/"):])) || !mayStartRequest(method) || len(method) == 0 {
				t.Fatalf("%q: %s from a line that is no request line", data, proto)
			}
		default:
			t.Fatalf("%q: unknown protocol %q", data, proto)
		}
	})
}

// bytesConn is a connection whose peer sent data and closed: reads yield data, then EOF.
type bytesConn struct {
	net.Conn // nil: only Read, deadlines and Close are used
	r        *bytes.Reader
}

func (c *bytesConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *bytesConn) SetReadDeadline(time.Time) error { return nil }
func (c *bytesConn) Close() error                    { return nil }
