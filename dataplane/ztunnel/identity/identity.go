// Package identity is ztunnel's certificate manager: one certificate per workload
// identity of the pods it serves, asked of the mesh CA (IstioCertificateService) with
// ztunnel's own token and the workload identity as ImpersonatedIdentity in the request's
// metadata (ztunnel's src/identity/caclient.rs), renewed at 80% of its life as the
// agents renew theirs, dropped when no pod of that identity is left.
package identity

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
	securitypb "istio.io/api/security/v1alpha1"
)

// rotateFraction of the time left is when a certificate is renewed (the agents' 0.8).
const rotateFraction = 0.8

// certTTL is the lifetime asked for (Istio's default 24h).
const certTTL = 24 * time.Hour

// Cert is one identity's certificate with its key and the trust bundle that came with it.
type Cert struct {
	Identity string
	TLS      tls.Certificate // leaf + intermediates, with the key
	Leaf     *x509.Certificate
	Chain    []*x509.Certificate // leaf and intermediates
	Roots    []*x509.Certificate
}

// Signer asks the CA to sign a CSR for id (the impersonated identity).
type Signer interface {
	Sign(ctx context.Context, csrPEM []byte, id string, ttl time.Duration) ([]string, error)
}

// CAClient is Signer over IstioCertificateService on CA_ADDRESS.
type CAClient struct {
	Conn      grpc.ClientConnInterface
	TokenFile string // ztunnel's own token, read on every call
}

// Sign implements Signer.
func (c *CAClient) Sign(ctx context.Context, csrPEM []byte, id string, ttl time.Duration) ([]string, error) {
	tok, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	md, err := structpb.NewStruct(map[string]any{"ImpersonatedIdentity": id})
	if err != nil {
		return nil, err
	}
	resp, err := securitypb.NewIstioCertificateServiceClient(c.Conn).CreateCertificate(ctx, &securitypb.IstioCertificateRequest{
		Csr: string(csrPEM), ValidityDuration: int64(ttl / time.Second), Metadata: md,
	})
	if err != nil {
		return nil, fmt.Errorf("create certificate for %s: %w", id, err)
	}
	return resp.GetCertChain(), nil
}

// Manager holds the certificates of the identities in use. Safe for concurrent use.
type Manager struct {
	signer Signer
	log    *slog.Logger

	mu    sync.Mutex
	certs map[string]*entry
	ctx   context.Context
}

type entry struct {
	refs   int
	cert   *Cert
	err    error
	ready  chan struct{} // closed when the first attempt ends
	cancel context.CancelFunc
}

// NewManager makes a manager whose renewals live until ctx ends.
func NewManager(ctx context.Context, signer Signer, log *slog.Logger) *Manager {
	return &Manager{signer: signer, log: log, certs: map[string]*entry{}, ctx: ctx}
}

// Acquire starts keeping a certificate for id (one reference per pod of that identity).
func (m *Manager) Acquire(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.certs[id]; ok {
		e.refs++
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	e := &entry{refs: 1, ready: make(chan struct{}), cancel: cancel}
	m.certs[id] = e
	go m.keep(ctx, id, e)
}

// Release drops one reference; the last one stops renewing and forgets the certificate.
func (m *Manager) Release(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.certs[id]
	if !ok {
		return
	}
	if e.refs--; e.refs <= 0 {
		e.cancel()
		delete(m.certs, id)
	}
}

// Get returns id's current certificate, waiting for the first one (or ctx). id must be
// acquired.
func (m *Manager) Get(ctx context.Context, id string) (*Cert, error) {
	m.mu.Lock()
	e, ok := m.certs[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no certificate is kept for %s", id)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the certificate of %s: %w", id, ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.cert == nil {
		return nil, fmt.Errorf("certificate of %s: %w", id, e.err)
	}
	return e.cert, nil
}

// Certificates returns the certificates held, sorted by identity (for config_dump).
func (m *Manager) Certificates() []*Cert {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Cert
	for _, e := range m.certs {
		if e.cert != nil {
			out = append(out, e.cert)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Identity < out[j].Identity })
	return out
}

// State is one identity's certificate or why there is none yet.
type State struct {
	Identity string
	Cert     *Cert // nil while the first fetch is under way or after it failed
	Err      error // the last failure when Cert is nil
}

// States returns every identity kept, sorted, with its certificate or error.
func (m *Manager) States() []State {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]State, 0, len(m.certs))
	for id, e := range m.certs {
		out = append(out, State{Identity: id, Cert: e.cert, Err: e.err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Identity < out[j].Identity })
	return out
}

// keep fetches id's certificate and renews it until ctx ends; a failure retries with
// backoff (1 s doubling to 30 s).
func (m *Manager) keep(ctx context.Context, id string, e *entry) {
	backoff := time.Second
	first := true
	for {
		c, err := Issue(ctx, m.signer, id)
		m.mu.Lock()
		if err == nil {
			e.cert, e.err = c, nil
		} else if e.cert == nil {
			e.err = err
		}
		m.mu.Unlock()
		if first {
			first = false
			close(e.ready) // Get answers now, with the certificate or the error
		}
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("workload certificate", "identity", id, "err", err, "retry_in", backoff)
			wait, backoff = backoff, min(backoff*2, 30*time.Second)
		} else {
			backoff = time.Second
			left := time.Until(c.Leaf.NotAfter)
			wait = max(time.Duration(float64(left)*rotateFraction), 10*time.Second)
			m.log.Info("workload certificate", "identity", id, "not_after", c.Leaf.NotAfter, "rotate_in", wait.Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Issue makes a P-256 key and a CSR for id and has s sign it.
func Issue(ctx context.Context, s Signer, id string) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	u, err := url.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("parse identity: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		return nil, fmt.Errorf("create csr: %w", err)
	}
	chain, err := s.Sign(ctx, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), id, certTTL)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, p := range chain {
		rest := []byte(p)
		for {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse issued certificate: %w", err)
			}
			certs = append(certs, c)
		}
	}
	if len(certs) < 2 {
		return nil, fmt.Errorf("create certificate for %s: chain has %d certificates, want leaf and root", id, len(certs))
	}
	if pub, ok := certs[0].PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("issued certificate is not for the key asked")
	}
	n := len(certs) - 1 // the roots are the trailing self-signed certificates
	for n > 1 && selfSigned(certs[n-1]) {
		n--
	}
	out := &Cert{Identity: id, Leaf: certs[0], Chain: certs[:n], Roots: certs[n:]}
	out.TLS.PrivateKey = key
	out.TLS.Leaf = certs[0]
	for _, c := range certs[:n] {
		out.TLS.Certificate = append(out.TLS.Certificate, c.Raw)
	}
	return out, nil
}

func selfSigned(c *x509.Certificate) bool {
	return c.IsCA && bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}
