package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/meshlab/meshlab/dataplane/rawio"
)

// h2 settings as ztunnel's (src/config.rs): 4 MiB stream window, 16 MiB connection
// window, 1 MiB frames; a client connection carries at most 100 streams, a server
// accepts 200.
const (
	streamWindow     = 4 << 20
	connWindow       = 16 << 20
	maxFrame         = 1 << 20
	maxClientStreams = 100
	maxServerStreams = 200
)

// Key is ztunnel's WorkloadKey: tunnels are shared only between connections with the
// same source identity, acceptable destination identities, source IP and destination.
type Key struct {
	SrcID string
	DstID string // the acceptable identities, joined with ","
	Src   netip.Addr
	Dst   netip.AddrPort
}

// KeyFor builds a Key from the identity set.
func KeyFor(srcID string, dstIDs []string, src netip.Addr, dst netip.AddrPort) Key {
	return Key{SrcID: srcID, DstID: strings.Join(dstIDs, ","), Src: src, Dst: dst}
}

// Dial opens the TCP connection under a tunnel (from the source pod, marked).
type Dial func(ctx context.Context, dst netip.AddrPort) (net.Conn, error)

// Request is one CONNECT to send.
type Request struct {
	Key       Key
	Authority netip.AddrPort // the final target ip:port (:authority)
	Header    http.Header    // baggage, forwarded, traceparent
	TLS       *tls.Config    // ClientConfig for this destination
	Dial      Dial
}

// StatusError is a non-200 answer to a CONNECT.
type StatusError struct{ Code int }

func (e *StatusError) Error() string {
	return fmt.Sprintf("hbone connect: %d %s", e.Code, http.StatusText(e.Code))
}

// Pool holds the client tunnels. Safe for concurrent use.
//
// It uses x/net/http2's ClientConn rather than net/http's: a tunnel is one connection this
// package dialled from inside a pod (marked, TLS done here), which net/http's transport
// does not hand over as a conn of its own.
//
//nolint:staticcheck // SA1019: x/net/http2's per-connection API, see above
type Pool struct {
	t *http2.Transport

	mu    sync.Mutex
	conns map[Key][]*http2.ClientConn
}

// NewPool makes an empty pool.
//
//nolint:staticcheck // SA1019: see Pool
func NewPool() *Pool {
	t1 := &http.Transport{HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream:     streamWindow,
		MaxReceiveBufferPerConnection: connWindow,
		MaxReadFrameSize:              maxFrame,
	}}
	t, err := http2.ConfigureTransports(t1)
	if err != nil {
		panic(err) // only fails when t1 is already configured
	}
	t.MaxReadFrameSize = maxFrame
	t.StrictMaxConcurrentStreams = true
	t.ReadIdleTimeout = 10 * time.Second
	t.PingTimeout = 20 * time.Second
	return &Pool{t: t, conns: map[Key][]*http2.ClientConn{}}
}

// Close closes every pooled connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, cs := range p.conns {
		for _, c := range cs {
			_ = c.Close()
		}
		delete(p.conns, k)
	}
}

// CloseFrom closes the pooled connections of source address src (a pod that went away).
func (p *Pool) CloseFrom(src netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, cs := range p.conns {
		if k.Src != src {
			continue
		}
		for _, c := range cs {
			_ = c.Close()
		}
		delete(p.conns, k)
	}
}

// Connect opens a tunnel stream to req.Authority through a pooled connection for req.Key,
// dialling one when none can take a stream. A non-200 answer is a *StatusError.
func (p *Pool) Connect(ctx context.Context, req Request) (*Stream, error) {
	cc, err := p.conn(ctx, req)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	hreq := &http.Request{
		Method:        http.MethodConnect,
		URL:           &url.URL{Host: req.Authority.String()},
		Host:          req.Authority.String(),
		Header:        req.Header.Clone(),
		Body:          pr,
		ContentLength: -1,
	}
	hreq = hreq.WithContext(context.WithoutCancel(ctx))
	resp, err := cc.RoundTrip(hreq)
	if err != nil {
		_ = pw.Close()
		return nil, fmt.Errorf("hbone connect %s via %s: %w", req.Authority, req.Key.Dst, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = pw.Close()
		_ = resp.Body.Close()
		return nil, &StatusError{Code: resp.StatusCode}
	}
	return &Stream{w: pw, r: resp.Body, resp: resp}, nil
}

// conn returns a pooled connection able to take a stream, or dials one.
//
//nolint:staticcheck // SA1019: see Pool
func (p *Pool) conn(ctx context.Context, req Request) (*http2.ClientConn, error) {
	p.mu.Lock()
	live := p.conns[req.Key][:0]
	var pick *http2.ClientConn
	for _, c := range p.conns[req.Key] {
		st := c.State()
		if st.Closed || st.Closing {
			continue
		}
		live = append(live, c)
		if pick == nil && c.CanTakeNewRequest() && st.StreamsActive+st.StreamsPending < maxClientStreams {
			pick = c
		}
	}
	if len(live) == 0 {
		delete(p.conns, req.Key)
	} else {
		p.conns[req.Key] = live
	}
	p.mu.Unlock()
	if pick != nil {
		return pick, nil
	}
	raw, err := req.Dial(ctx, req.Key.Dst)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(rawio.Conn(raw), req.TLS) // records without the runtime's syscall bookkeeping (rawio)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("hbone tls handshake with %s: %w", req.Key.Dst, err)
	}
	if tc.ConnectionState().NegotiatedProtocol != ALPN {
		_ = tc.Close()
		return nil, fmt.Errorf("hbone tls handshake with %s: peer did not agree to h2", req.Key.Dst)
	}
	cc, err := p.t.NewClientConn(tc)
	if err != nil {
		_ = tc.Close()
		return nil, fmt.Errorf("hbone h2 with %s: %w", req.Key.Dst, err)
	}
	p.mu.Lock()
	p.conns[req.Key] = append(p.conns[req.Key], cc)
	p.mu.Unlock()
	return cc, nil
}

// Stream is one CONNECT tunnel as a byte stream: Write sends DATA, CloseWrite ends the
// request (END_STREAM, the peer's half-close), Read returns the peer's DATA.
type Stream struct {
	w    *io.PipeWriter
	r    io.ReadCloser
	resp *http.Response
	once sync.Once
}

func (s *Stream) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s *Stream) Write(b []byte) (int, error) { return s.w.Write(b) }

// CloseWrite half-closes the tunnel.
func (s *Stream) CloseWrite() error { return s.w.Close() }

// Close ends both directions (a reset of the stream if the peer has not ended its own).
func (s *Stream) Close() error {
	s.once.Do(func() {
		_ = s.w.CloseWithError(errors.New("tunnel closed"))
		_ = s.r.Close()
	})
	return nil
}
