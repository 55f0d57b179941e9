package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// signer is a CA that signs what it is asked for, or fails for one identity.
type signer struct {
	t     *testing.T
	key   *ecdsa.PrivateKey
	root  *x509.Certificate
	fail  string
	calls atomic.Int32
}

func newSigner(t *testing.T) *signer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	root, _ := x509.ParseCertificate(der)
	return &signer{t: t, key: key, root: root}
}

func (s *signer) Sign(_ context.Context, csrPEM []byte, id string, ttl time.Duration) ([]string, error) {
	s.calls.Add(1)
	if id == s.fail {
		return nil, errors.New("impersonation refused")
	}
	b, _ := pem.Decode(csrPEM)
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now(), NotAfter: time.Now().Add(ttl), URIs: csr.URIs}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.root, csr.PublicKey, s.key)
	if err != nil {
		return nil, err
	}
	return []string{
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.root.Raw})),
	}, nil
}

func TestManager(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSigner(t)
	s.fail = "spiffe://cluster.local/ns/x/sa/refused"
	m := NewManager(ctx, s, slog.New(slog.DiscardHandler))
	const id = "spiffe://cluster.local/ns/default/sa/a"
	m.Acquire(id)
	m.Acquire(id) // a second pod of the same identity shares the certificate
	gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
	defer gcancel()
	c, err := m.Get(gctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Leaf.URIs[0].String(); got != id || len(c.Roots) != 1 || len(c.TLS.Certificate) != 1 {
		t.Errorf("certificate for %s, %d roots, chain %d; want %s, 1 root, leaf only", got, len(c.Roots), len(c.TLS.Certificate), id)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d CA calls for one identity held twice, want 1", n)
	}
	m.Acquire(s.fail)
	if _, err := m.Get(gctx, s.fail); err == nil {
		t.Error("a refused identity got a certificate")
	}
	states := m.States()
	if len(states) != 2 || states[0].Cert == nil || states[1].Err == nil {
		t.Errorf("states = %+v, want a's certificate and the refusal", states)
	}
	m.Release(id)
	if len(m.Certificates()) != 1 {
		t.Error("the certificate went with the first of its two pods")
	}
	m.Release(id)
	m.Release(s.fail)
	if len(m.States()) != 0 {
		t.Errorf("states after every release: %+v", m.States())
	}
	if _, err := m.Get(gctx, id); err == nil {
		t.Error("Get of a released identity answered")
	}
}
