package httpconn

import (
	"bufio"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// statusLines caches "200 OK\r\n" and the like for the codes below 600.
var statusLines [600]string

func init() {
	for code := 100; code < len(statusLines); code++ {
		text := http.StatusText(code)
		if text == "" {
			text = "Unknown"
		}
		statusLines[code] = strconv.Itoa(code) + " " + text + "\r\n"
	}
}

// writeStatus writes the status code and reason phrase of a status line.
func writeStatus(bw *bufio.Writer, code int) {
	if code >= 100 && code < len(statusLines) {
		_, _ = bw.WriteString(statusLines[code])
		return
	}
	_, _ = bw.WriteString(strconv.Itoa(code) + " Unknown\r\n")
}

// writeHeader writes h's fields in sorted order with lower-case names, as Envoy's
// HTTP/1 codec writes them; values have CR and LF replaced so a field cannot be split.
// Trailers (http.TrailerPrefix) are left for writeTrailers.
func writeHeader(bw *bufio.Writer, h http.Header) {
	var stack [16]string
	keys := stack[:0]
	for k := range h {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		writeField(bw, k, h[k])
	}
}

// writeTrailers writes the trailer fields set with http.TrailerPrefix.
func writeTrailers(bw *bufio.Writer, h http.Header) {
	for k, vs := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && name != "" {
			writeField(bw, name, vs)
		}
	}
}

func writeField(bw *bufio.Writer, name string, values []string) {
	for _, v := range values {
		// The name lowered straight into the writer's free space (a byte-wise
		// WriteByte loop was a visible share of the proxy's CPU).
		_, _ = bw.Write(appendLower(bw.AvailableBuffer(), name))
		_, _ = bw.WriteString(": ")
		if hasCRLF(v) {
			v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
		}
		_, _ = bw.WriteString(strings.TrimSpace(v))
		_, _ = bw.WriteString("\r\n")
	}
}

// appendLower appends name in lower case to b.
func appendLower(b []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// hasCRLF reports whether v holds a CR or an LF (two vectorized byte searches, where
// strings.ContainsAny walks a 1 KB peer-metadata value byte by byte).
func hasCRLF(v string) bool {
	return strings.IndexByte(v, '\r') >= 0 || strings.IndexByte(v, '\n') >= 0
}

// cachedDate is the Date header value of the current second.
type cachedDate struct {
	unix int64
	text string
}

var dateCache atomic.Pointer[cachedDate]

// httpDate returns the current time in HTTP's date format, formatted once per second.
func httpDate() string {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.unix == now.Unix() {
		return d.text
	}
	d := &cachedDate{unix: now.Unix(), text: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.text
}
