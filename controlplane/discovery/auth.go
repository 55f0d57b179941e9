package discovery

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Authorizer decides whether the connection a stream arrived on may speak for a proxy.
// It is called once per xDS stream, with the stream's context (PeerCredFromContext and
// BearerToken read it) and the node id of the stream's first request, before anything of
// the stream is recorded or served. A non-nil error refuses the stream; a status error
// keeps its code, any other becomes PermissionDenied. It is called concurrently.
type Authorizer func(ctx context.Context, nodeID string) error

// PeerCred is the kernel's account of the process at the other end of a unix socket
// connection (SO_PEERCRED, taken when it connected), and the network namespace that
// process was in when the server accepted it.
type PeerCred struct {
	PID, UID, GID int32
	// NetNSDev and NetNSIno identify the peer's network namespace (stat of
	// /proc/<pid>/ns/net); both zero when the process had exited before it was read.
	NetNSDev, NetNSIno uint64
}

// peerAuthInfo carries a connection's credentials to the streams on it.
type peerAuthInfo struct {
	credentials.CommonAuthInfo
	cred *PeerCred // nil on TCP
	// certs is the verified client certificate chain of a TLS connection, leaf first;
	// nil without TLS or without a client certificate.
	certs []*x509.Certificate
}

func (peerAuthInfo) AuthType() string { return "meshlab-peercred" }

// PeerCredFromContext returns the credentials of the unix socket peer of a stream's
// connection; false for TCP connections (or a server without them).
func PeerCredFromContext(ctx context.Context) (PeerCred, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return PeerCred{}, false
	}
	ai, ok := p.AuthInfo.(peerAuthInfo)
	if !ok || ai.cred == nil {
		return PeerCred{}, false
	}
	return *ai.cred, true
}

// PeerCertificate returns the verified client certificate of a stream's TLS connection,
// or nil when the connection is plaintext or the client sent none.
func PeerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ai, ok := p.AuthInfo.(peerAuthInfo)
	if !ok || len(ai.certs) == 0 {
		return nil
	}
	return ai.certs[0]
}

// BearerToken returns the token of the stream's first "authorization: Bearer <token>"
// metadata value, as istiod reads a proxy's JWT, or "".
func BearerToken(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// peerCreds are gRPC transport credentials that record who is at the other end of a
// connection: for a unix socket, the kernel's peer credentials (the connection stays
// plaintext, as the proxies and agents dial it); for TCP, when tls is set and the client
// opens with a TLS ClientHello, its verified certificate, istiod's mTLS. A TCP client
// that speaks plaintext HTTP/2 is served as before.
type peerCreds struct {
	tls *tls.Config // optional
}

var _ credentials.TransportCredentials = peerCreds{}

func (peerCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("peer credentials are server-side only")
}

func (creds peerCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	ai := peerAuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}
	switch inner := unwrapConn(c).(type) {
	case *net.UnixConn:
		cred, err := readPeerCred(inner)
		if err != nil {
			return nil, nil, err
		}
		ai.cred = cred
	case *net.TCPConn:
		if creds.tls == nil {
			break
		}
		// A TLS record of type handshake (22) starts a ClientHello; the HTTP/2
		// preface starts with "PRI".
		br := bufio.NewReader(c)
		first, err := br.Peek(1)
		if err != nil {
			return nil, nil, fmt.Errorf("read first byte: %w", err)
		}
		pc := &peekedConn{Conn: c, r: br}
		if first[0] != 22 {
			return pc, ai, nil
		}
		tc := tls.Server(pc, creds.tls)
		if err := tc.Handshake(); err != nil {
			return nil, nil, fmt.Errorf("tls handshake: %w", err)
		}
		st := tc.ConnectionState()
		ai.SecurityLevel = credentials.PrivacyAndIntegrity
		if len(st.VerifiedChains) > 0 {
			ai.certs = st.VerifiedChains[0]
		}
		return tc, ai, nil
	}
	return c, ai, nil
}

// peekedConn reads through the buffer that peeked at its first byte.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}
func (creds peerCreds) Clone() credentials.TransportCredentials { return creds }
func (peerCreds) OverrideServerName(string) error               { return nil }

// unwrapConn returns the connection under the server's wrappers (trackedConn).
func unwrapConn(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}

// readPeerCred reads SO_PEERCRED of c and the network namespace of the peer process.
func readPeerCred(c *net.UnixConn) (*PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("read peer credentials: %w", err)
	}
	var (
		ucred *unix.Ucred
		gerr  error
	)
	if err := raw.Control(func(fd uintptr) {
		ucred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("read peer credentials: %w", err)
	}
	if gerr != nil {
		return nil, fmt.Errorf("read peer credentials: %w", gerr)
	}
	pc := &PeerCred{PID: ucred.Pid, UID: int32(ucred.Uid), GID: int32(ucred.Gid)}
	var st unix.Stat_t
	if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", ucred.Pid), &st) == nil {
		pc.NetNSDev, pc.NetNSIno = st.Dev, st.Ino
	}
	return pc, nil
}

// nodeRequest is what DiscoveryRequest and DeltaDiscoveryRequest share.
type nodeRequest interface{ GetNode() *core.Node }

// authStreamInterceptor binds every stream to the node id of its first request, after
// authorize accepted it for the stream's connection: a stream whose first request has no
// node id, whose connection may not speak for it, or that later names another node id,
// ends with an error before go-control-plane (and so proxy-status) sees the request.
func authStreamInterceptor(authorize Authorizer, onRefuse func(nodeID string, err error)) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		as := &authStream{ServerStream: ss, authorize: authorize, onRefuse: onRefuse}
		err := handler(srv, as)
		// go-control-plane ends a stream whose receive failed as if the proxy had hung
		// up; the proxy is told why instead.
		if refused := as.refusal(); refused != nil {
			return refused
		}
		return err
	}
}

type authStream struct {
	grpc.ServerStream
	authorize Authorizer
	onRefuse  func(nodeID string, err error)

	mu      sync.Mutex
	node    string // bound node id, "" until the first request was accepted
	refused error  // why the stream was refused, if it was
}

func (s *authStream) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	req, ok := m.(nodeRequest)
	if !ok {
		return nil
	}
	id := req.GetNode().GetId()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.node == "" && id == "":
		return s.refuse(id, status.Error(codes.InvalidArgument, "xds stream refused: the first request carries no node id"))
	case s.node == "":
		if err := s.authorize(s.Context(), id); err != nil {
			if _, isStatus := status.FromError(err); !isStatus {
				err = status.Error(codes.PermissionDenied, "xds stream refused: "+err.Error())
			}
			return s.refuse(id, err)
		}
		s.node = id
	case id != "" && id != s.node:
		return s.refuse(id, status.Errorf(codes.PermissionDenied, "xds stream refused: node id %q on a stream bound to %q", id, s.node))
	}
	return nil
}

func (s *authStream) refuse(id string, err error) error {
	s.refused = err
	if s.onRefuse != nil {
		s.onRefuse(id, err)
	}
	return err
}
