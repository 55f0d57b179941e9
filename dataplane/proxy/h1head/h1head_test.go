package h1head

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// requestSeeds are heads the fuzzers start from: the fast path's cases and the ones it
// leaves to net/http.
var requestSeeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /bytes/1024?x=1 HTTP/1.1\r\nhost: server.default.svc:8080\r\nuser-agent: fortio.org/fortio-1.69.1\r\nx-request-id: 9f0e\r\nx-forwarded-proto: http\r\nbaggage: k=v\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, close\r\n\r\n",
	"GET / HTTP/1.1\r\nhost: a\r\nx-a: 1\r\nX-A:  2 \r\nx-a:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"GET http://example.com/x HTTP/1.1\r\nHost: other\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\r\nBad Name: a\r\n\r\n",
	"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
	"GET / HTTP/1.1\r\n: empty\r\n\r\n",
	"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET x HTTP/1.1\r\nHost: a\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"\r\nGET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n",
}

// FuzzRequest holds ReadRequest's fast path to net/http's ReadRequest: on every head it
// takes, the same request, the same error or one of Envoy's stricter rules, and the
// reader left at the same byte.
func FuzzRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		s := scan{}
		var ok bool
		if s.head, ok = peekHead(br); !ok {
			return
		}
		var got http.Request
		ok, err := parseRequest(&s, make([]field, 0, 32), &got)
		if !ok {
			return
		}
		_, _ = br.Discard(len(s.head))
		want, werr := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		switch {
		case errors.Is(err, ErrTooManyHeaders), errors.Is(err, ErrDuplicateContentLength), errors.Is(err, ErrContentLengthAndChunked):
			return // Envoy's rules, stricter than net/http's
		case err != nil:
			if werr == nil {
				t.Fatalf("fast path: %v; net/http took it", err)
			}
			return
		case werr != nil:
			t.Fatalf("fast path took the head; net/http: %v", werr)
		}
		checkSameRequest(t, &got, want)
		rest, _ := io.ReadAll(br)
		if want := data[len(s.head):]; !bytes.Equal(rest, want) {
			t.Fatalf("the fast path left %q after the head, want %q", rest, want)
		}
	})
}

func checkSameRequest(t *testing.T, got, want *http.Request) {
	t.Helper()
	type view struct {
		Method, RequestURI, Proto, Host string
		Major, Minor                    int
		URL                             string
		Header                          http.Header
		Close                           bool
		ContentLength                   int64
		NoBody                          bool
		TransferEncoding                []string
	}
	v := func(r *http.Request) view {
		return view{r.Method, r.RequestURI, r.Proto, r.Host, r.ProtoMajor, r.ProtoMinor, r.URL.String(), r.Header,
			r.Close, r.ContentLength, r.Body == http.NoBody, r.TransferEncoding}
	}
	if g, w := v(got), v(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("fast path:\n%+v\nnet/http:\n%+v", g, w)
	}
	if !reflect.DeepEqual(got.URL, want.URL) {
		t.Fatalf("URL %#v, net/http %#v", got.URL, want.URL)
	}
}

var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\ncontent-length: 1024\r\nx-envoy-peer-metadata: Cg0KBUxBQkVMUxIE\r\nx-envoy-peer-metadata-id: sidecar~10.0.0.1\r\ndate: Sun, 29 Nov 2026 20:00:00 GMT\r\n\r\n" + strings.Repeat("x", 1024),
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
	"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok",
	"HTTP/1.1 200 \r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTrailer: x\r\n\r\nx",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\n\r\nuntil close",
	"HTTP/1.1 200 OK\r\nContent-Length: 01\r\nPragma: no-cache\r\n\r\nx",
}

// FuzzResponse holds ReadResponse's fast path to net/http's ReadResponse: the same
// response, the same body bytes and end, and the reader left at the same byte.
func FuzzResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	req, _ := http.NewRequest(http.MethodGet, "http://a/", nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		s := scan{}
		var ok bool
		if s.head, ok = peekHead(br); !ok {
			return
		}
		got := &http.Response{Request: req}
		ok, err := parseResponse(&s, make([]field, 0, 32), got, br)
		if !ok {
			return
		}
		_, _ = br.Discard(len(s.head))
		wr := bufio.NewReader(bytes.NewReader(data))
		want, werr := http.ReadResponse(wr, req)
		switch {
		case errors.Is(err, ErrTooManyHeaders), errors.Is(err, ErrDuplicateContentLength), errors.Is(err, ErrContentLengthAndChunked):
			return
		case err != nil:
			t.Fatalf("fast path: unexpected error %v", err)
		case werr != nil:
			t.Fatalf("fast path took the head; net/http: %v", werr)
		}
		type view struct {
			Status, Proto        string
			Code, Major, Minor   int
			Header               http.Header
			Close                bool
			ContentLength        int64
			NoBody               bool
			TransferEncoding     []string
			Body                 string
			BodyErr, BodyErrWant bool
		}
		v := func(r *http.Response) view {
			return view{Status: r.Status, Proto: r.Proto, Code: r.StatusCode, Major: r.ProtoMajor, Minor: r.ProtoMinor,
				Header: r.Header.Clone(), Close: r.Close, ContentLength: r.ContentLength, NoBody: r.Body == http.NoBody,
				TransferEncoding: r.TransferEncoding}
		}
		g, w := v(got), v(want)
		gb, gerr := io.ReadAll(got.Body)
		wb, werr2 := io.ReadAll(want.Body)
		g.Body, w.Body = string(gb), string(wb)
		if !errors.Is(gerr, werr2) && (gerr == nil || werr2 == nil || gerr.Error() != werr2.Error()) {
			t.Fatalf("body: fast path %v, net/http %v", gerr, werr2)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("fast path:\n%+v\nnet/http:\n%+v", g, w)
		}
		rest, _ := io.ReadAll(br)
		wrest, _ := io.ReadAll(wr)
		if !bytes.Equal(rest, wrest) {
			t.Fatalf("the fast path left %q after the response, net/http %q", rest, wrest)
		}
	})
}

// TestReadRequestEnvoyRules: the rules where Envoy is stricter than net/http, each with
// its error, in a head the fast path reads.
func TestReadRequestEnvoyRules(t *testing.T) {
	many := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("x-h: v\r\n", MaxHeaders) + "\r\n"
	for _, tc := range []struct {
		name, head string
		want       error
	}{
		{"too many fields", many, ErrTooManyHeaders},
		{"duplicate content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\nx", ErrDuplicateContentLength},
		{"content-length and chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n1\r\nx\r\n0\r\n\r\n", ErrContentLengthAndChunked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRequest(context.Background(), bufio.NewReaderSize(strings.NewReader(tc.head), 4096))
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	// A head longer than the buffer, read by net/http, is held to the same limit.
	long := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("x-long-header-name: "+strings.Repeat("v", 40)+"\r\n", MaxHeaders) + "\r\n"
	if _, err := ReadRequest(context.Background(), bufio.NewReaderSize(strings.NewReader(long), 4096)); !errors.Is(err, ErrTooManyHeaders) {
		t.Fatalf("a long head with %d fields: %v, want ErrTooManyHeaders", MaxHeaders+1, err)
	}
	// The limit counts fields: 100 are taken.
	ok := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("x-h: v\r\n", MaxHeaders-1) + "\r\n"
	req, err := ReadRequest(context.Background(), bufio.NewReaderSize(strings.NewReader(ok), 4096))
	if err != nil || len(req.Header["X-H"]) != MaxHeaders-1 {
		t.Fatalf("100 fields: %v", err)
	}
}

// TestReadRequestPaths: a head that arrives a byte at a time, and one longer than the
// buffer (read by net/http), both read whole; the context is the one given; a pipelined
// request stays in the buffer.
func TestReadRequestPaths(t *testing.T) {
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	long := "GET /long HTTP/1.1\r\nHost: a\r\nx-big: " + strings.Repeat("b", 5000) + "\r\n\r\n"
	for _, tc := range []struct {
		name string
		r    io.Reader
		path string
	}{
		{"byte at a time", iotest.OneByteReader(strings.NewReader("GET /one HTTP/1.1\r\nhost: a\r\n\r\nGET /two HTTP/1.1\r\nHost: a\r\n\r\n")), "/one"},
		{"longer than the buffer", strings.NewReader(long + "GET /two HTTP/1.1\r\nHost: a\r\n\r\n"), "/long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(tc.r, 4096)
			req, err := ReadRequest(ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			if req.URL.Path != tc.path || req.Host != "a" || req.Context().Value(ctxKey{}) != "v" {
				t.Fatalf("got %s host %q, context value %v", req.URL.Path, req.Host, req.Context().Value(ctxKey{}))
			}
			next, err := ReadRequest(ctx, br)
			if err != nil || next.URL.Path != "/two" {
				t.Fatalf("the next request: %v", err)
			}
		})
	}
}

// TestBodyEnds: a body read to its Content-Length ends with EOF and leaves the next
// response in the buffer; one cut short ends with io.ErrUnexpectedEOF.
func TestBodyEnds(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://a/", nil)
	br := bufio.NewReaderSize(strings.NewReader("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab"), 4096)
	resp, err := ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Body.(*Body); !ok {
		t.Fatalf("body %T: the fast path did not read the head", resp.Body)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "abc" || resp.Header.Get("Content-Length") != "3" {
		t.Fatalf("body %q, %v", b, err)
	}
	resp, err = ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) || string(b) != "ab" {
		t.Fatalf("short body %q, %v: want ab and io.ErrUnexpectedEOF", b, err)
	}
}

// TestValidValue: the word-at-a-time check agrees with the byte-at-a-time one on every
// byte value at every position of a value, and on values of every length to 17.
func TestValidValue(t *testing.T) {
	for n := 0; n <= 17; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				v := bytes.Repeat([]byte("a"), n)
				v[pos] = byte(c)
				if got, want := validValue(v), validBytes(v); got != want {
					t.Fatalf("value %q: validValue %v, byte by byte %v", v, got, want)
				}
			}
		}
	}
}

// BenchmarkReadRequest: a sidecar's request head, by the fast path and by net/http.
func BenchmarkReadRequest(b *testing.B) {
	// With the ~1 KB peer metadata the client sidecar adds.
	head := strings.Replace(requestSeeds[1], "baggage: k=v\r\n", "baggage: k=v\r\nx-envoy-peer-metadata: "+strings.Repeat("ChQKDkFQUF9DT05UQUlORVJTEgIaAA", 34)+"\r\nx-envoy-peer-metadata-id: sidecar~10.244.0.9~client-0.default~default.svc.cluster.local\r\n", 1)
	r := strings.NewReader(head)
	br := bufio.NewReaderSize(r, 4096)
	for _, bc := range []struct {
		name string
		read func() error
	}{
		{"h1head", func() error { _, err := ReadRequest(context.Background(), br); return err }},
		{"net-http", func() error { _, err := http.ReadRequest(br); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r.Reset(head)
				br.Reset(r)
				if err := bc.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
