package ca

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	securitypb "istio.io/api/security/v1alpha1"

	"github.com/meshlab/meshlab/internal/testutil"
)

var backend = Identity{Namespace: "default", ServiceAccount: "backend"}

// csrFor returns a PEM CSR with the given URI SANs (and DNS names).
func csrFor(t *testing.T, uris []string, dns ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{DNSNames: dns}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func newCA(t *testing.T, o Options) *CA {
	t.Helper()
	if o.Root == nil {
		r, err := NewRoot(DefaultTrustDomain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		o.Root = r
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parseLeaf(t *testing.T, chain []string) (*x509.Certificate, *x509.Certificate) {
	t.Helper()
	if len(chain) != 2 {
		t.Fatalf("chain has %d certificates, want 2", len(chain))
	}
	var certs []*x509.Certificate
	for _, p := range chain {
		b, _ := pem.Decode([]byte(p))
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	return certs[0], certs[1]
}

func TestSignIssuesSPIFFECertVerifiedByRoot(t *testing.T) {
	t.Parallel()
	c := newCA(t, Options{})
	id := "spiffe://cluster.local/ns/default/sa/backend"
	chain, err := c.Sign(csrFor(t, []string{id}), backend, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, root := parseLeaf(t, chain)
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id || len(leaf.DNSNames) != 0 {
		t.Fatalf("leaf SANs = %v %v, want only %s", leaf.URIs, leaf.DNSNames, id)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("verify leaf: %v", err)
	}
	if got := time.Until(leaf.NotAfter); got < DefaultTTL-time.Second || got > DefaultTTL+time.Second {
		t.Fatalf("lifetime %s, want about %s", got, DefaultTTL)
	}
}

func TestSignRefusesOtherSANs(t *testing.T) {
	t.Parallel()
	c := newCA(t, Options{})
	good := "spiffe://cluster.local/ns/default/sa/backend"
	for _, tc := range []struct {
		name string
		csr  []byte
	}{
		{"other sa", csrFor(t, []string{"spiffe://cluster.local/ns/default/sa/frontend"})},
		{"extra dns", csrFor(t, []string{good}, "backend.default.svc")},
		{"two uris", csrFor(t, []string{good, "spiffe://cluster.local/ns/default/sa/frontend"})},
		{"no san", csrFor(t, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.Sign(tc.csr, backend, 0)
			if !errors.Is(err, ErrIdentity) {
				t.Fatalf("Sign = %v, want ErrIdentity", err)
			}
		})
	}
	if _, err := c.Sign([]byte("garbage"), backend, 0); err == nil {
		t.Fatal("Sign(garbage) succeeded")
	}
}

// TestSignTrustDomain: the certificate names the caller in the CA's trust domain, as
// istiod's CA names the authenticated caller in the mesh config's, whatever trust domain
// the CSR asks for (an agent started before a migration asks for the old one); a
// SetTrustDomain reaches the next certificate.
func TestSignTrustDomain(t *testing.T) {
	t.Parallel()
	c := newCA(t, Options{})
	for _, tc := range []struct {
		set, ask, want string
	}{
		{"", "spiffe://cluster.local/ns/default/sa/backend", "spiffe://cluster.local/ns/default/sa/backend"},
		{"old-td", "spiffe://cluster.local/ns/default/sa/backend", "spiffe://old-td/ns/default/sa/backend"},
		{"new-td", "spiffe://old-td/ns/default/sa/backend", "spiffe://new-td/ns/default/sa/backend"},
		{"", "spiffe://new-td/ns/default/sa/backend", "spiffe://cluster.local/ns/default/sa/backend"},
	} {
		c.SetTrustDomain(tc.set)
		chain, err := c.Sign(csrFor(t, []string{tc.ask}), backend, 0)
		if err != nil {
			t.Fatalf("set %q, ask %s: %v", tc.set, tc.ask, err)
		}
		b, _ := pem.Decode([]byte(chain[0]))
		leaf, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != tc.want {
			t.Errorf("set %q, ask %s: certificate for %v, want %s", tc.set, tc.ask, leaf.URIs, tc.want)
		}
		if got := c.TrustDomain(); got != cmp.Or(tc.set, DefaultTrustDomain) {
			t.Errorf("TrustDomain() = %q after SetTrustDomain(%q)", got, tc.set)
		}
	}
}

func TestSignTTL(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newCA(t, Options{TTL: 10 * time.Second, Now: func() time.Time { return now }})
	csr := csrFor(t, []string{"spiffe://cluster.local/ns/default/sa/backend"})
	for _, tc := range []struct {
		name      string
		requested time.Duration
		want      time.Duration
	}{
		{"default", 0, 10 * time.Second},
		{"shorter", 3 * time.Second, 3 * time.Second},
		{"capped", time.Hour, 10 * time.Second},
	} {
		chain, err := c.Sign(csr, backend, tc.requested)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := parseLeaf(t, chain)
		if got := leaf.NotAfter.Sub(now); got != tc.want {
			t.Errorf("%s: lifetime %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := New(Options{Root: c.root, TTL: time.Millisecond}); err == nil {
		t.Fatal("New with a 1ms TTL succeeded")
	}
}

func TestUserSuppliedRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := NewRoot("example.org", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "ca-cert.pem"), filepath.Join(dir, "ca-key.pem")
	if err := r.WriteFiles(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v, want 0600", fi.Mode(), err)
	}
	loaded, err := LoadRoot(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	c := newCA(t, Options{Root: loaded, TrustDomain: "example.org"})
	chain, err := c.Sign(csrFor(t, []string{"spiffe://example.org/ns/default/sa/backend"}), backend, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, root := parseLeaf(t, chain)
	if !root.Equal(r.Cert) {
		t.Fatal("chain root is not the supplied root")
	}
	if err := leaf.CheckSignatureFrom(r.Cert); err != nil {
		t.Fatalf("leaf not signed by supplied root: %v", err)
	}
	// A key that does not match the certificate is refused.
	other, err := NewRoot("example.org", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := other.WriteFiles(filepath.Join(dir, "o.pem"), filepath.Join(dir, "o-key.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRoot(certPath, filepath.Join(dir, "o-key.pem")); err == nil {
		t.Fatal("LoadRoot with a mismatched key succeeded")
	}
}

func TestServiceAuthenticatesByToken(t *testing.T) {
	t.Parallel()
	c := newCA(t, Options{})
	tokens := NewTokens()
	tokA, err := tokens.Issue(Caller{Pod: "frontend-v1", Identity: Identity{Namespace: "default", ServiceAccount: "frontend"}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	NewService(c, tokens, testutil.Logger(t)).Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := securitypb.NewIstioCertificateServiceClient(conn)
	call := func(tok, san string) (*securitypb.IstioCertificateResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		}
		return client.CreateCertificate(ctx, &securitypb.IstioCertificateRequest{Csr: string(csrFor(t, []string{san})), ValidityDuration: 60})
	}
	own := "spiffe://cluster.local/ns/default/sa/frontend"
	resp, err := call(tokA, own)
	if err != nil {
		t.Fatalf("own identity: %v", err)
	}
	leaf, _ := parseLeaf(t, resp.GetCertChain())
	if life := leaf.NotAfter.Sub(leaf.NotBefore); leaf.URIs[0].String() != own || life < 60*time.Second || life > 61*time.Second {
		t.Fatalf("leaf %v valid %s..%s", leaf.URIs, leaf.NotBefore, leaf.NotAfter)
	}
	for _, tc := range []struct {
		name, tok, san string
		want           codes.Code
	}{
		{"other pod's identity", tokA, "spiffe://cluster.local/ns/default/sa/backend", codes.PermissionDenied},
		{"wrong token", "nope", own, codes.Unauthenticated},
		{"no token", "", own, codes.Unauthenticated},
	} {
		_, err := call(tc.tok, tc.san)
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}
