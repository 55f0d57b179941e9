package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	securitypb "istio.io/api/security/v1alpha1"
)

// DefaultTrustDomain is the trust domain of the SPIFFE ID the agent asks for.
const DefaultTrustDomain = "cluster.local"

// workloadCert is one certificate the CA issued, with the key made for it.
type workloadCert struct {
	keyPEM   []byte
	chainPEM []byte // the CA's whole chain, leaf to roots, as Istio's agent serves its default secret (concatCerts)
	rootPEM  []byte // the trust bundle: one or more roots (ROOTCA)
	leaf     *x509.Certificate
	inter    []*x509.Certificate // intermediates, e.g. the new root cross-signed by the old one
	bundle   []*x509.Certificate
}

// certSigner gets a certificate for a public key's CSR. Safe for concurrent use.
type certSigner interface {
	sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]string, error)
}

// caClient is Istio's IstioCertificateService client over the lab's xds.sock, with the
// pod's bearer token read from tokenPath on every call (the lab may replace it).
type caClient struct {
	conn      *grpc.ClientConn
	client    securitypb.IstioCertificateServiceClient
	tokenPath string
}

var _ certSigner = (*caClient)(nil)

// newCAClient connects (lazily) to the CA on the unix socket.
func newCAClient(socket, tokenPath string) (*caClient, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect to CA: %w", err)
	}
	return &caClient{conn: conn, client: securitypb.NewIstioCertificateServiceClient(conn), tokenPath: tokenPath}, nil
}

func (c *caClient) sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]string, error) {
	tok, err := os.ReadFile(c.tokenPath)
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := c.client.CreateCertificate(ctx, &securitypb.IstioCertificateRequest{
		Csr: string(csrPEM), ValidityDuration: int64(ttl / time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	return resp.GetCertChain(), nil
}

func (c *caClient) Close() error { return c.conn.Close() }

// spiffeID returns spiffe://<td>/ns/<ns>/sa/<sa>.
func spiffeID(trustDomain, ns, sa string) string {
	return (&url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/ns/" + ns + "/sa/" + sa}).String()
}

// issue makes a P-256 key in memory, a CSR for id, and has s sign it.
func issue(ctx context.Context, s certSigner, id string, ttl time.Duration) (*workloadCert, error) {
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
	chain, err := s.sign(ctx, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), ttl)
	if err != nil {
		return nil, err
	}
	if len(chain) < 2 {
		return nil, fmt.Errorf("create certificate: chain has %d certificates, want leaf and root", len(chain))
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, p := range chain {
		b, _ := pem.Decode([]byte(p))
		if b == nil {
			return nil, fmt.Errorf("create certificate: chain certificate %d is not PEM", i)
		}
		if certs[i], err = x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("parse chain certificate %d: %w", i, err)
		}
	}
	n := splitBundle(certs)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &workloadCert{
		keyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		chainPEM: []byte(strings.Join(chain, "")),
		rootPEM:  []byte(strings.Join(chain[n:], "")),
		leaf:     certs[0],
		inter:    certs[1:n],
		bundle:   certs[n:],
	}, nil
}

// splitBundle returns where the trust bundle starts in a CA's chain: the CA sends
// [leaf, intermediates..., roots...] and the roots are the trailing self-signed
// certificates. The last certificate is always a root (Istio's [leaf, root] shape), even
// one the agent cannot check.
func splitBundle(certs []*x509.Certificate) int {
	n := len(certs) - 1
	for n > 1 && selfSigned(certs[n-1]) {
		n--
	}
	return n
}

// selfSigned reports whether c is a root: issued by itself and signed by its own key.
func selfSigned(c *x509.Certificate) bool {
	return c.IsCA && bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}

// serial renders a certificate serial as colon-free lowercase hex.
func serial(c *x509.Certificate) string { return hex.EncodeToString(c.SerialNumber.Bytes()) }
