package fortio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/jrpc"
	"fortio.org/fortio/stats"
	flog "fortio.org/log"
)

// clientOptions are what `fortio load` and `fortio curl` take for their HTTP requests.
type clientOptions struct {
	url     string
	timeout time.Duration // connect and whole-request timeout, fortio's -timeout
	header  http.Header   // -H headers, User-Agent included (fortio's default one)
	host    string        // a -H Host: override
}

// newClientOptions normalises url as fortio's HTTPOptions.Init does (http:// assumed
// when there is no scheme) and validates the -H headers, fortio's "Name: value" form.
func newClientOptions(url string, timeout time.Duration, headers []string) (*clientOptions, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		flog.Warnf("Assuming http:// on missing scheme for '%s'", url)
		url = "http://" + url
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("-timeout %v: must be positive", timeout)
	}
	o := &clientOptions{url: url, timeout: timeout, header: http.Header{}}
	o.header.Set(jrpc.UserAgentHeader, jrpc.UserAgent)
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf("-H %q: invalid extra header, expecting Key: Value", h)
		}
		if strings.EqualFold(name, "Host") {
			o.host = value
			continue
		}
		o.header.Set(name, value)
	}
	return o, nil
}

// client is one of fortio's HTTP clients: one per load goroutine (-c), each with its own
// keep-alive connection that it reuses until the server closes it or a request fails,
// as fortio's client does. It counts the sockets it opens, times their connects and
// records the address each reached (fortio's per-connection report).
type client struct {
	id        int
	opts      *clientOptions
	transport *http.Transport
	http      *http.Client

	// mu guards the dial bookkeeping: net/http dials on a goroutine of its own, which
	// can outlive a request that timed out.
	mu        sync.Mutex
	sockets   int64
	connStats *stats.Histogram
	addrs     *stats.Occurrence
}

// newClient makes client id; connStats' offset and resolution are the run's.
func newClient(id int, o *clientOptions, connStats *stats.Histogram) *client {
	c := &client{id: id, opts: o, connStats: connStats, addrs: stats.NewOccurrence()}
	dialer := &net.Dialer{Timeout: o.timeout}
	c.transport = &http.Transport{
		Proxy: nil, // fortio connects to the URL's host itself
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			start := time.Now()
			conn, err := dialer.DialContext(ctx, network, addr)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.connStats.Record(time.Since(start).Seconds())
			c.sockets++
			if err != nil {
				flog.S(flog.Error, "Unable to connect", flog.Str("dest", addr), flog.Attr("err", err), flog.Attr("thread", c.id))
				return nil, err
			}
			c.addrs.Record(conn.RemoteAddr().String())
			return conn, nil
		},
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		DisableCompression:  true,                                                   // fortio asks for no encoding
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1, as fortio
	}
	c.http = &http.Client{
		Transport: c.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // fortio reports a 3xx, it does not follow it
		},
	}
	return c
}

// fetch makes one GET and reads the whole answer. It returns fortio's code (the HTTP
// status, -1 when the request failed), the total size (status line and headers plus
// body) and the header size (0 for a code that is not OK, as fortio's). When headers or body is not nil, the response's status
// line and headers (as they came, in name order) and its body are written there.
func (c *client) fetch(ctx context.Context, headers, body io.Writer) (code int, size, headerSize int64) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.opts.url, nil)
	if err != nil {
		flog.S(flog.Error, "Unable to make request", flog.Str("url", c.opts.url), flog.Attr("err", err), flog.Attr("thread", c.id))
		return -1, 0, 0
	}
	req.Header = c.opts.header.Clone()
	if c.opts.host != "" {
		req.Host = c.opts.host
	}
	resp, err := c.http.Do(req)
	if err != nil {
		flog.S(flog.Error, "Unable to send request", flog.Attr("err", err), flog.Attr("thread", c.id))
		return -1, 0, 0
	}
	defer resp.Body.Close()
	head := responseHead(resp)
	headerSize = int64(len(head))
	if headers != nil {
		_, _ = io.WriteString(headers, head)
	}
	if body == nil {
		body = io.Discard
	}
	n, err := io.Copy(body, resp.Body)
	size = headerSize + n
	if err != nil && !errors.Is(err, io.EOF) {
		flog.S(flog.Error, "Unable to read response", flog.Attr("err", err), flog.Attr("thread", c.id))
		return -1, size, headerSize
	}
	if !codeIsOK(resp.StatusCode) {
		// fortio's client stops parsing at a code it does not count as OK: it reports no
		// header size, and drops the connection (the next call opens a new socket).
		flog.S(flog.Warning, "Non ok http code", flog.Attr("code", resp.StatusCode),
			flog.Str("status", resp.Proto+" "+resp.Status), flog.Attr("thread", c.id))
		_ = resp.Body.Close()
		c.transport.CloseIdleConnections()
		return resp.StatusCode, size, 0
	}
	return resp.StatusCode, size, headerSize
}

// close releases the client's idle connection.
func (c *client) close() { c.transport.CloseIdleConnections() }

// responseHead is the response's status line and headers as HTTP/1.1 writes them
// (names in sorted order: net/http does not keep the wire order), with the blank line.
func responseHead(resp *http.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\r\n", resp.Proto, resp.Status)
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if len(resp.TransferEncoding) > 0 {
		fmt.Fprintf(&b, "Transfer-Encoding: %s\r\n", strings.Join(resp.TransferEncoding, ", "))
	}
	b.WriteString("\r\n")
	return b.String()
}

// codeIsOK is fortio's success test: 2xx, and 418 (its teapot convention).
func codeIsOK(code int) bool {
	return (code >= 200 && code <= 299) || code == http.StatusTeapot
}
