package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/meshlab/meshlab/dataplane/h2connect"
	"github.com/meshlab/meshlab/dataplane/rawio"
)

// ConnectRequest is one CONNECT a pod's 15008 received.
type ConnectRequest struct {
	Authority netip.AddrPort // the target the client asked for
	PeerID    string         // the client's SPIFFE identity (its verified certificate)
	Remote    netip.AddrPort // the tunnel's TCP source (the client pod)
	Local     netip.AddrPort // the tunnel's TCP destination (this pod's ip:15008)
	Header    http.Header
}

// Upstream is what a Handler answers a CONNECT with: the connection to the app (the
// tunnel's bytes are spliced to it), and what to call when the splice ends.
type Upstream struct {
	Conn net.Conn
	Done func(fromClient, toClient int64, err error)
}

// Handler decides a CONNECT: an upstream and 200, or no upstream and the status to answer
// (400 bad target, 401 denied by policy, 503 no upstream). Called on the stream's goroutine.
type Handler func(ctx context.Context, req *ConnectRequest) (Upstream, int)

// Serve runs the HBONE server on one accepted TCP connection until it or ctx ends: TLS
// handshake with cfg (ServerConfig), then HTTP/2 with ztunnel's windows, one Handler call
// per stream. The HTTP/2 server is dataplane/h2connect, which writes a stream's frames
// from the stream's own goroutine (x/net's server hopped through its serve loop and
// flushed from a goroutine per flush).
func Serve(ctx context.Context, raw net.Conn, cfg *tls.Config, h Handler, log *slog.Logger) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() }) // the handshake does not watch ctx
	defer stop()
	tc := tls.Server(rawio.Conn(raw), cfg) // records without the runtime's syscall bookkeeping (rawio)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		log.Debug("hbone tls handshake", "remote", raw.RemoteAddr(), "err", err)
		return
	}
	st := tc.ConnectionState()
	if st.NegotiatedProtocol != ALPN || len(st.PeerCertificates) == 0 {
		return
	}
	peer := PeerIdentity(st.PeerCertificates[0])
	remote := addrPort(raw.RemoteAddr())
	local := addrPort(raw.LocalAddr())
	srv := &h2connect.Server{
		MaxConcurrentStreams: maxServerStreams,
		MaxReadFrameSize:     maxFrame,
		ConnWindow:           connWindow,
		StreamWindow:         streamWindow,
		IdleTimeout:          time.Hour,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serveStream(w, r, peer, remote, local, h)
		}),
	}
	srv.ServeConn(ctx, tc)
}

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func serveStream(w http.ResponseWriter, r *http.Request, peer string, remote, local netip.AddrPort, h Handler) {
	if r.Method != http.MethodConnect {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	target, err := netip.ParseAddrPort(r.Host)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	up, code := h(r.Context(), &ConnectRequest{
		Authority: netip.AddrPortFrom(target.Addr().Unmap(), target.Port()),
		PeerID:    peer, Remote: remote, Local: local, Header: r.Header,
	})
	if code != http.StatusOK || up.Conn == nil {
		if code == http.StatusOK {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		return
	}
	defer up.Conn.Close()
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		if up.Done != nil {
			up.Done(0, 0, err)
		}
		return
	}
	fromPeer := make(chan int64, 1)
	go func() {
		n, err := io.Copy(up.Conn, r.Body)
		fromPeer <- n
		if err != nil && !errors.Is(err, io.EOF) {
			_ = up.Conn.Close() // a reset tunnel resets the app's connection
			return
		}
		if cw, ok := up.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	toPeer, copyErr := copyFlush(w, rc, up.Conn)
	// The app ended its side (or failed): returning ends the stream. The server resets a
	// stream whose request body is still open instead of half-closing it, as x/net's did
	// (a departure from ztunnel, see docs/ARCHITECTURE.md); the copy above then ends with
	// the body closed.
	_ = up.Conn.Close()
	if up.Done != nil {
		go func() { up.Done(<-fromPeer, toPeer, copyErr) }()
	}
}

// copyFlush copies src to an HTTP/2 response, flushing every chunk.
func copyFlush(w io.Writer, rc *http.ResponseController, src io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
			if ferr := rc.Flush(); ferr != nil {
				return total, ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
