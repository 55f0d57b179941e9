package cluster

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestWriteRequestAsEnvoysCodec pins what the pool writes upstream: Envoy's HTTP/1 codec
// writes header names in lower case and adds no header of its own but host and framing
// (net/http's Request.Write adds "User-Agent: Go-http-client/1.1").
func TestWriteRequestAsEnvoysCodec(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		want string
	}{
		{"a GET has host and its headers, lower case, nothing added", func() *http.Request {
			r, _ := http.NewRequest("GET", "http://10.0.0.1:8080/a?b=c", nil)
			r.Host = "backend:8080"
			r.Header.Set("X-Request-Id", "1")
			return r
		}, "GET /a?b=c HTTP/1.1\r\nhost: backend:8080\r\nx-request-id: 1\r\n\r\n"},
		{"a POST without a body says content-length 0", func() *http.Request {
			r, _ := http.NewRequest("POST", "http://h/", nil)
			return r
		}, "POST / HTTP/1.1\r\nhost: h\r\ncontent-length: 0\r\n\r\n"},
		{"a body is framed by its length", func() *http.Request {
			r, _ := http.NewRequest("PUT", "http://h/x", strings.NewReader("hello"))
			return r
		}, "PUT /x HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\n\r\nhello"},
		{"a value cannot split the head", func() *http.Request {
			r, _ := http.NewRequest("GET", "http://h/", nil)
			r.Header["X-Evil"] = []string{"a\r\nx-injected: 1"}
			return r
		}, "GET / HTTP/1.1\r\nhost: h\r\nx-evil: a  x-injected: 1\r\n\r\n"},
		{"close asks for connection: close", func() *http.Request {
			r, _ := http.NewRequest("GET", "http://h/", nil)
			r.Close = true
			return r
		}, "GET / HTTP/1.1\r\nhost: h\r\nconnection: close\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			bw := bufio.NewWriter(&b)
			if err := writeRequest(bw, tc.req()); err != nil {
				t.Fatal(err)
			}
			_ = bw.Flush()
			if b.String() != tc.want {
				t.Errorf("wrote %q\nwant  %q", b.String(), tc.want)
			}
			// What was written is a request net/http reads back.
			if _, err := http.ReadRequest(bufio.NewReader(strings.NewReader(b.String()))); err != nil && !errors.Is(err, io.EOF) {
				t.Errorf("written request does not parse: %v", err)
			}
		})
	}
}
