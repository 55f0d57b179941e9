// Package tlsctx is the proxy's TLS transport socket: it keeps the SDS secrets
// (envoy.extensions.transport_sockets.tls.v3.Secret) in a Store, compiles
// DownstreamTlsContext and UpstreamTlsContext into Contexts, builds crypto/tls
// configurations that read the current secrets at every handshake (so a rotated secret
// serves new handshakes while open connections keep theirs), verifies peers against the
// trusted CA and SPIFFE URI SAN matchers as Envoy does, and peeks a TLS ClientHello for
// the tls_inspector listener filter without consuming it.
package tlsctx

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// Secret is a compiled SDS secret: a certificate with its key, or a validation context.
type Secret struct {
	Name    string
	Version string
	Updated time.Time
	Proto   *tlsv3.Secret
	Cert    *tls.Certificate // tls_certificate; nil for a validation context
	Roots   *x509.CertPool   // validation_context.trusted_ca; nil for a certificate
	Leaf    *x509.Certificate
	CAs     []*x509.Certificate
}

var secretAllow = fieldcheck.Allow{
	"envoy.extensions.transport_sockets.tls.v3.Secret":                       {"name", "tls_certificate", "validation_context"},
	"envoy.extensions.transport_sockets.tls.v3.TlsCertificate":               {"certificate_chain", "private_key"},
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext": {"trusted_ca"},
	"envoy.config.core.v3.DataSource":                                        {"inline_bytes", "inline_string"},
}

// CompileSecret validates s and parses its certificates and key.
func CompileSecret(s *tlsv3.Secret, version string) (*Secret, error) {
	if s == nil {
		return nil, errors.New("secret is empty")
	}
	if err := s.ValidateAll(); err != nil {
		return nil, fmt.Errorf("secret '%s': %w", s.GetName(), err)
	}
	if err := secretAllow.Check(s); err != nil {
		return nil, fmt.Errorf("secret '%s': %w", s.GetName(), err)
	}
	out := &Secret{Name: s.GetName(), Version: version, Updated: time.Now(), Proto: s}
	switch {
	case s.GetTlsCertificate() != nil:
		tc := s.GetTlsCertificate()
		cert, err := tls.X509KeyPair(data(tc.GetCertificateChain()), data(tc.GetPrivateKey()))
		if err != nil {
			return nil, fmt.Errorf("secret '%s': tls_certificate: %w", s.GetName(), err)
		}
		out.Cert = &cert
		out.Leaf = cert.Leaf
	case s.GetValidationContext() != nil:
		certs, err := parseCerts(data(s.GetValidationContext().GetTrustedCa()))
		if err != nil {
			return nil, fmt.Errorf("secret '%s': validation_context.trusted_ca: %w", s.GetName(), err)
		}
		out.Roots = x509.NewCertPool()
		for _, c := range certs {
			out.Roots.AddCert(c)
		}
		out.CAs = certs
	default:
		return nil, fmt.Errorf("secret '%s': type: only tls_certificate and validation_context are supported", s.GetName())
	}
	return out, nil
}

func data(ds *corev3.DataSource) []byte {
	if s := ds.GetInlineString(); s != "" {
		return []byte(s)
	}
	return ds.GetInlineBytes()
}

func parseCerts(pemBytes []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, pemBytes = pem.Decode(pemBytes)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// Store holds the current secrets by name. Safe for concurrent use; readers see a
// secret replaced atomically, which is what makes rotation take effect at the next
// handshake without touching open connections.
type Store struct {
	mu      sync.RWMutex
	secrets map[string]*Secret
	changed chan struct{} // closed and replaced on every Set
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{secrets: map[string]*Secret{}, changed: make(chan struct{})}
}

// Set installs or replaces secrets.
func (s *Store) Set(secrets ...*Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sec := range secrets {
		s.secrets[sec.Name] = sec
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Get returns the named secret.
func (s *Store) Get(name string) (*Secret, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.secrets[name]
	return sec, ok
}

// All returns the secrets sorted by name.
func (s *Store) All() []*Secret {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Secret, 0, len(s.secrets))
	for _, sec := range s.secrets {
		out = append(out, sec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Has reports whether every named secret is present (Envoy's warming: a listener or
// cluster is not used until its secrets arrived).
func (s *Store) Has(names ...string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, n := range names {
		if _, ok := s.secrets[n]; !ok {
			return false
		}
	}
	return true
}

// Changed returns a channel closed at the next Set.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}
