package tlsctx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/rawio"
)

// VerifyError is a peer certificate Envoy's validator refuses. Stat is the ssl.* counter
// Envoy increments for it (fail_verify_error, fail_verify_san, fail_verify_no_cert).
type VerifyError struct {
	Stat string
	Err  error
}

// Error says why the certificate was refused.
func (e *VerifyError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *VerifyError) Unwrap() error { return e.Err }

// HandshakeError is a failed TLS handshake.
type HandshakeError struct {
	Err error
}

// Error says why the handshake failed.
func (e *HandshakeError) Error() string { return "tls handshake: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *HandshakeError) Unwrap() error { return e.Err }

// Detail returns the failure as Envoy writes it in response code details, from
// BoringSSL's error queue.
func (e *HandshakeError) Detail() string {
	var ve *VerifyError
	if errors.As(e.Err, &ve) {
		return "TLS_error:|268435581:SSL_routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end"
	}
	return "TLS_error:|268435703:SSL_routines:OPENSSL_internal:WRONG_VERSION_NUMBER:TLS_error_end"
}

// ServerConfig returns the crypto/tls configuration of a downstream TLS context. Secrets
// are read from store at each handshake.
func (c *Context) ServerConfig(store *Store) *tls.Config {
	base := &tls.Config{
		MinVersion:   c.MinVersion,
		MaxVersion:   c.MaxVersion,
		CipherSuites: c.CipherSuites,
		// BoringSSL (Envoy's) fills records up to 16 KB from the first byte; crypto/tls's
		// dynamic sizing cuts a new connection's first records to one TCP segment each,
		// one write(2) per record.
		DynamicRecordSizingDisabled: true,
		// require_client_certificate is enforced in verify, so that a missing
		// certificate counts as ssl.fail_verify_no_cert as in Envoy.
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.certificate(store)
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return c.verify(store, cs) },
	}
	return &tls.Config{
		// BoringSSL in Envoy ignores ALPN when no protocol is shared instead of failing
		// the handshake as crypto/tls does; offer only the shared ones.
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := base.Clone()
			for _, p := range c.ALPN {
				if slices.Contains(hello.SupportedProtos, p) {
					cfg.NextProtos = append(cfg.NextProtos, p)
				}
			}
			return cfg, nil
		},
	}
}

// ClientConfig returns the crypto/tls configuration of an upstream TLS context. Without a
// validation context the server's certificate is not verified, as in Envoy.
func (c *Context) ClientConfig(store *Store) *tls.Config {
	return &tls.Config{
		MinVersion:                  c.MinVersion,
		MaxVersion:                  c.MaxVersion,
		CipherSuites:                c.CipherSuites,
		DynamicRecordSizingDisabled: true, // as BoringSSL (see ServerConfig)
		ServerName:                  c.SNI,
		NextProtos:                  c.ALPN,
		InsecureSkipVerify:          true, // verified by VerifyConnection against the SDS roots and SAN matchers
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c.CertSecret == "" {
				return &tls.Certificate{}, nil
			}
			return c.certificate(store)
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return c.verify(store, cs) },
	}
}

func (c *Context) certificate(store *Store) (*tls.Certificate, error) {
	sec, ok := store.Get(c.CertSecret)
	if !ok || sec.Cert == nil {
		return nil, fmt.Errorf("no certificate: secret '%s' is not available", c.CertSecret)
	}
	return sec.Cert, nil
}

// verify applies Envoy's default certificate validator: the chain must lead to the
// trusted CA and some SAN must match one of the matchers.
func (c *Context) verify(store *Store, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		if c.RequireClientCert || !c.Server && c.ValidationSecret != "" {
			return &VerifyError{Stat: "fail_verify_no_cert", Err: errors.New("peer did not present a certificate")}
		}
		return nil
	}
	if c.ValidationSecret == "" {
		return nil
	}
	sec, ok := store.Get(c.ValidationSecret)
	if !ok || sec.Roots == nil {
		return &VerifyError{Stat: "fail_verify_error", Err: fmt.Errorf("validation context secret '%s' is not available", c.ValidationSecret)}
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots: sec.Roots, Intermediates: inter, CurrentTime: time.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return &VerifyError{Stat: "fail_verify_error", Err: fmt.Errorf("verify certificate chain: %w", err)}
	}
	if len(c.SANs) == 0 || matchSANs(c.SANs, leaf) {
		return nil
	}
	return &VerifyError{Stat: "fail_verify_san", Err: fmt.Errorf("certificate SANs %v match none of the subject alt name matchers", sans(leaf))}
}

func sans(leaf *x509.Certificate) []string {
	var out []string
	for _, u := range leaf.URIs {
		out = append(out, u.String())
	}
	return append(out, leaf.DNSNames...)
}

func matchSANs(ms []SANMatcher, leaf *x509.Certificate) bool {
	for _, m := range ms {
		if m.Type == "" || m.Type == "URI" {
			for _, u := range leaf.URIs {
				if m.match(u.String()) {
					return true
				}
			}
		}
		if m.Type == "" || m.Type == "DNS" {
			for _, d := range leaf.DNSNames {
				if m.match(d) {
					return true
				}
			}
		}
	}
	return false
}

// Handshake runs the TLS handshake of conn (server side when the context is downstream)
// and counts it in scope's ssl.* stats with Envoy's names: ssl.handshake on success,
// ssl.connection_error and the ssl.fail_verify_* reason on failure. The caller closes
// conn on error.
func (c *Context) Handshake(ctx context.Context, conn net.Conn, store *Store, scope stats.Scope) (*tls.Conn, error) {
	var tc *tls.Conn
	conn = rawio.Conn(conn) // the records' reads and writes without the runtime's syscall bookkeeping
	if c.Server {
		tc = tls.Server(conn, c.ServerConfig(store))
	} else {
		cfg := c.ClientConfig(store)
		if a := ALPNFrom(ctx); a != nil {
			cfg.NextProtos = a.Protos
		}
		tc = tls.Client(conn, cfg)
	}
	ssl := scope.Scope("ssl", "")
	if err := tc.HandshakeContext(ctx); err != nil {
		ssl.Counter("connection_error").Inc()
		var ve *VerifyError
		if errors.As(err, &ve) {
			ssl.Counter(ve.Stat).Inc()
		}
		return nil, &HandshakeError{Err: err}
	}
	ssl.Counter("handshake").Inc()
	if c.Server && len(tc.ConnectionState().PeerCertificates) == 0 {
		ssl.Counter("no_certificate").Inc()
	}
	return tc, nil
}

// HTTP1Conn hides that a connection is a *tls.Conn from net/http, which closes a TLS
// connection whose ALPN protocol it has no handler for (Istio's istio-http/1.1); net/http
// still sees the TLS state through ConnectionState and serves HTTP/1.x on it.
type HTTP1Conn struct{ *tls.Conn }

// LocalLeaf returns the leaf of the context's current certificate secret, or nil.
func (c *Context) LocalLeaf(store *Store) *x509.Certificate {
	if sec, ok := store.Get(c.CertSecret); ok && c.CertSecret != "" {
		return sec.Leaf
	}
	return nil
}
