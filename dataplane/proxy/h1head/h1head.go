// Package h1head reads HTTP/1.x request and response heads for the proxy's codecs (the
// downstream HTTP/1 codec and the upstream connection pool).
//
// net/http's ReadRequest and ReadResponse read a head line by line through
// net/textproto, which allocates a string per line, per name it does not know and per
// value: about 15 allocations for a sidecar's request or response head, and the largest
// piece of the proxy's own CPU per request after the socket calls (issue 30). Here a head
// that is already whole in the connection's read buffer, as nearly every head is, is
// parsed in place: the names are put in canonical form in the buffer, the whole head
// becomes one string, and the names and values are slices of it; one []string holds
// every value.
//
// The fast path takes only what it can decide exactly as net/http does, with Envoy's
// rules where Envoy is stricter (see ReadRequest). Anything else (a head longer than the
// buffer, a bare LF, obs-fold, a byte net/http rejects, Transfer-Encoding, a request
// body, CONNECT, a 1xx or HEAD response, a response read to the connection's end) is read
// by net/http, from the same buffer, untouched: FuzzRequest and FuzzResponse hold the
// fast path to net/http's answers on the inputs it takes.
package h1head

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/url"
	"unsafe"

	"golang.org/x/net/http/httpguts"
)

// MaxHeaders is Envoy's default max_headers_count (HttpProtocolOptions): a request with
// more header fields is answered 431.
const MaxHeaders = 100

// Errors of the rules where Envoy's HTTP/1 codec (llhttp) is stricter than net/http.
var (
	// ErrTooManyHeaders: more than MaxHeaders fields (Envoy: 431, http1.too_many_headers).
	ErrTooManyHeaders = errors.New("too many header fields")
	// ErrContentLengthAndChunked: Transfer-Encoding with Content-Length, which Envoy
	// refuses unless allow_chunked_length (http1.content_length_and_chunked_not_allowed);
	// net/http drops the Content-Length instead.
	ErrContentLengthAndChunked = errors.New("both Content-Length and Transfer-Encoding are set")
	// ErrDuplicateContentLength: two Content-Length fields, which llhttp refuses
	// ("Duplicate Content-Length") even when they agree; net/http takes equal ones.
	ErrDuplicateContentLength = errors.New("duplicate Content-Length")
)

var crlf = []byte("\r\n")

// field is one header line of a head: offsets into the head.
type field struct {
	name, colon, end int // name starts at name; the line's CRLF starts at end
}

// scan is what the first pass learnt of a head, without changing it.
type scan struct {
	head    []byte // up to and including the empty line's CRLF
	lineEnd int    // where the first line's CRLF starts
	cl      int    // index in fields of Content-Length; -1: none
	te      bool
	host    int // Host fields seen
}

// peekHead returns the head at the start of br's buffer if it is whole there and every
// line ends in CRLF; ok is false when net/http must read it (a bare LF, an empty first
// line, a head longer than the buffer, or the connection ending first).
func peekHead(br *bufio.Reader) (head []byte, ok bool) {
	n := 1    // bytes to wait for
	from := 0 // where the search for the next LF resumes
	for {
		if _, err := br.Peek(n); err != nil {
			return nil, false
		}
		b, _ := br.Peek(br.Buffered()) // all of it: Peek(n) shows only n bytes
		for from < len(b) {
			i := bytes.IndexByte(b[from:], '\n')
			if i < 0 {
				break
			}
			i += from
			if i < 2 || b[i-1] != '\r' {
				return nil, false // a bare LF, or an empty first line
			}
			if i >= 3 && b[i-2] == '\n' {
				return b[:i+1], true // "\r\n\r\n"
			}
			from = i + 1
		}
		from = len(b)
		if len(b) >= br.Size() {
			return nil, false
		}
		n = len(b) + 1
	}
}

// tchar is RFC 9110's token character set (header names, methods).
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// scanFields checks the header lines of head after the first line (which ends at
// lineEnd) and returns them, appended to fields[:0]. ok is false for a line net/http must judge: a
// name that is not a token, obs-fold, a value byte net/http refuses (a control character
// but HTAB, or DEL).
func scanFields(s *scan, fields []field) (_ []field, ok bool, err error) {
	head := s.head
	fields, s.cl = fields[:0], -1
	i := s.lineEnd + 2
	for i < len(head)-2 {
		if len(fields) == MaxHeaders {
			return fields, true, ErrTooManyHeaders
		}
		f := field{name: i, colon: -1}
		for ; head[i] != ':'; i++ {
			if !tchar[head[i]] {
				return fields, false, nil // obs-fold, whitespace before the colon, a bad name
			}
		}
		if i == f.name {
			return fields, false, nil // an empty name
		}
		f.colon = i
		i++
		e := i + bytes.IndexByte(head[i:], '\r') // found: the head ends in CRLF CRLF
		if !validValue(head[i:e]) {
			return fields, false, nil
		}
		i = e
		if head[i+1] != '\n' {
			return fields, false, nil // a CR inside the line
		}
		f.end = i
		i += 2
		switch {
		case equalFold(head[f.name:f.colon], "content-length"):
			if s.cl >= 0 {
				return fields, true, ErrDuplicateContentLength
			}
			s.cl = len(fields)
		case equalFold(head[f.name:f.colon], "transfer-encoding"):
			s.te = true
		case equalFold(head[f.name:f.colon], "host"):
			s.host++
		}
		fields = append(fields, f)
	}
	if s.te && s.cl >= 0 {
		return fields, true, ErrContentLengthAndChunked
	}
	return fields, true, nil
}

// validValue reports whether a field value has only the bytes net/http takes: no control
// character but HTAB, no DEL. Eight bytes at a time (a sidecar's peer metadata value is
// ~1 KB): a word is looked at byte by byte only when it may hold one of them.
func validValue(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(v) >= 8 {
		w := binary.LittleEndian.Uint64(v)
		del := w ^ (ones * 0x7f)
		// A byte below 0x20 (a tab too), or a DEL (a zero byte in del).
		if ((w-ones*0x20)&^w|(del-ones)&^del)&highs != 0 {
			if !validBytes(v[:8]) {
				return false
			}
		}
		v = v[8:]
	}
	return validBytes(v)
}

func validBytes(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// build puts the names of s's fields in canonical form in place (as textproto's
// CanonicalMIMEHeaderKey) and returns the head as one string with its header map, the
// names and values slices of that string. It changes the buffer: call it only once the
// fast path is decided.
func build(s *scan, fields []field) (string, http.Header) {
	head := s.head
	for _, f := range fields {
		upper := true
		for j := f.name; j < f.colon; j++ {
			c := head[j]
			if upper && 'a' <= c && c <= 'z' {
				head[j] = c - ('a' - 'A')
			} else if !upper && 'A' <= c && c <= 'Z' {
				head[j] = c + ('a' - 'A')
			}
			upper = c == '-'
		}
	}
	text := string(head)
	h := make(http.Header, len(fields))
	values := make([]string, len(fields))
	for n, f := range fields {
		name := text[f.name:f.colon]
		v := trimOWS(text[f.colon+1 : f.end])
		if vs, dup := h[name]; dup {
			h[name] = append(vs, v)
			continue
		}
		values[n] = v
		h[name] = values[n : n+1 : n+1]
	}
	return text, h
}

// trimOWS trims the spaces and tabs around a field value, as textproto does.
func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// contentLength parses a Content-Length value the fast path takes: 1 to 18 digits (net/http
// judges the rest).
func contentLength(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// fixPragmaCacheControl is net/http's: "Pragma: no-cache" without Cache-Control reads
// as "Cache-Control: no-cache" too (RFC 7234).
func fixPragmaCacheControl(h http.Header) {
	if hp, ok := h["Pragma"]; ok && len(hp) > 0 && hp[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
}

// ReadRequest reads a request head from br and returns the request with ctx as its
// context. It is net/http's ReadRequest (the same request, the same errors) but for
// Envoy's rules: more than MaxHeaders fields (ErrTooManyHeaders), Transfer-Encoding
// with Content-Length (ErrContentLengthAndChunked) and two Content-Length fields
// (ErrDuplicateContentLength) are refused in a head the fast path reads; a head longer
// than br's buffer is net/http's, which takes the last two (its fields are counted
// after it read them).
func ReadRequest(ctx context.Context, br *bufio.Reader) (*http.Request, error) {
	var stack [32]field // the fields of most heads
	s := scan{}
	var ok bool
	s.head, ok = peekHead(br)
	if ok {
		var r http.Request
		ok, err := parseRequest(&s, stack[:], &r)
		if err != nil {
			if ok {
				_, _ = br.Discard(len(s.head))
			}
			return nil, err
		}
		if ok {
			_, _ = br.Discard(len(s.head))
			return r.WithContext(ctx), nil
		}
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	n := 0
	if req.Host != "" {
		n++ // the Host field, which ReadRequest keeps out of the map
	}
	for _, vs := range req.Header {
		n += len(vs)
	}
	if n > MaxHeaders {
		return nil, ErrTooManyHeaders
	}
	return req.WithContext(ctx), nil
}

// parseRequest is the fast path of ReadRequest: ok is false when net/http must read the
// head (nothing in it was changed then); err with ok is the fast path's answer.
func parseRequest(s *scan, fields []field, r *http.Request) (ok bool, err error) {
	head := s.head
	s.lineEnd = bytes.Index(head, crlf) // a CR before it fails the checks below
	line := head[:s.lineEnd]
	// METHOD SP request-target SP HTTP/1.x, each part as plain as net/http reads it.
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return false, nil
	}
	for _, c := range line[:sp1] {
		if !tchar[c] {
			return false, nil
		}
	}
	sp2 := sp1 + 1
	for ; sp2 < len(line) && line[sp2] != ' '; sp2++ {
		if c := line[sp2]; c <= ' ' || c >= 0x7f {
			return false, nil
		}
	}
	if sp2 == sp1+1 || sp2 == len(line) {
		return false, nil
	}
	var minor int
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
	default:
		return false, nil
	}
	if string(line[:sp1]) == http.MethodConnect {
		return false, nil
	}
	if fields, ok, err = scanFields(s, fields); !ok || err != nil {
		return ok, err
	}
	if s.te || s.host > 1 {
		return false, nil
	}
	var n int64
	if s.cl >= 0 {
		f := fields[s.cl]
		v := trimOWS(unsafe.String(&head[f.colon+1], f.end-f.colon-1))
		if n, ok = contentLength(v); !ok || n != 0 {
			return false, nil // a body: net/http's reader
		}
	}
	text, h := build(s, fields)
	r.Method = text[:sp1]
	r.RequestURI = text[sp1+1 : sp2]
	if r.URL, err = url.ParseRequestURI(r.RequestURI); err != nil {
		return true, err
	}
	r.Proto, r.ProtoMajor, r.ProtoMinor = text[sp2+1:s.lineEnd], 1, minor
	r.Header = h
	r.Host = r.URL.Host
	if r.Host == "" {
		if hs := h["Host"]; len(hs) > 0 {
			r.Host = hs[0]
		}
	}
	delete(h, "Host") // as net/http's ReadRequest: the host is r.Host
	fixPragmaCacheControl(h)
	conn := h["Connection"]
	hasClose := httpguts.HeaderValuesContainsToken(conn, "close")
	r.Close = hasClose || (minor == 0 && !httpguts.HeaderValuesContainsToken(conn, "keep-alive"))
	r.Body = http.NoBody
	return true, nil
}

// ReadResponse reads the response head to req from br, as net/http's ReadResponse. The
// fast path takes a 2xx-5xx answer (not 204 or 304) to a request other than HEAD framed
// by one Content-Length, without Transfer-Encoding or a Trailer field; its body is a
// *Body reading the Content-Length from br.
func ReadResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	var stack [32]field // the fields of most heads
	s := scan{}
	var ok bool
	if s.head, ok = peekHead(br); ok && req.Method != http.MethodHead {
		resp := &http.Response{Request: req}
		ok, err := parseResponse(&s, stack[:], resp, br)
		if ok {
			_, _ = br.Discard(len(s.head))
			if err != nil {
				return nil, err
			}
			return resp, nil
		}
	}
	return http.ReadResponse(br, req)
}

func parseResponse(s *scan, fields []field, resp *http.Response, br *bufio.Reader) (ok bool, err error) {
	head := s.head
	s.lineEnd = bytes.Index(head, crlf) // a CR before it fails the checks below
	line := head[:s.lineEnd]
	// HTTP/1.x SP 3DIGIT SP reason
	if len(line) < 13 || line[8] != ' ' || line[12] != ' ' {
		return false, nil
	}
	var minor int
	switch string(line[:8]) {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
	default:
		return false, nil
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return false, nil
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code >= 600 || code == http.StatusNoContent || code == http.StatusNotModified {
		return false, nil
	}
	for _, c := range line[13:] {
		if c < ' ' && c != '\t' {
			return false, nil
		}
	}
	if fields, ok, err = scanFields(s, fields); !ok || err != nil {
		return ok, err // Envoy's rules hold upstream too (a 502 for the client)
	}
	if s.te || s.cl < 0 {
		return false, nil
	}
	f := fields[s.cl]
	n, ok := contentLength(trimOWS(unsafe.String(&head[f.colon+1], f.end-f.colon-1)))
	if !ok {
		return false, nil
	}
	for _, f := range fields {
		if equalFold(head[f.name:f.colon], "trailer") {
			return false, nil
		}
	}
	text, h := build(s, fields)
	resp.Status = text[9:s.lineEnd]
	resp.StatusCode = code
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = text[:8], 1, minor
	resp.Header = h
	fixPragmaCacheControl(h)
	conn := h["Connection"]
	hasClose := httpguts.HeaderValuesContainsToken(conn, "close")
	if minor == 0 {
		resp.Close = hasClose || !httpguts.HeaderValuesContainsToken(conn, "keep-alive")
	} else {
		resp.Close = hasClose
		if hasClose {
			h.Del("Connection")
		}
	}
	resp.ContentLength = n
	if n == 0 {
		resp.Body = http.NoBody
	} else {
		resp.Body = &Body{r: br, remain: n}
	}
	return true, nil
}

// Body is a response body of known length read from the connection's reader, as
// net/http's body over an io.LimitReader: io.ErrUnexpectedEOF when the connection ends
// first, http.ErrBodyReadAfterClose after Close. Close does not read the rest (the
// pool closes a connection whose body was not read to its end). Not safe for
// concurrent use.
type Body struct {
	r      *bufio.Reader
	remain int64
	closed bool
}

// Read reads the body.
func (b *Body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.r.Read(p)
	b.remain -= int64(n)
	switch {
	case b.remain == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// Close ends the body.
func (b *Body) Close() error {
	b.closed = true
	return nil
}

// Remaining is how much of the body is left unread.
func (b *Body) Remaining() int64 { return b.remain }
