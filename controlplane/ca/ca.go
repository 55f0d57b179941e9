package ca

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"
)

// Defaults of a CA.
const (
	DefaultTrustDomain = "cluster.local"
	DefaultTTL         = 24 * time.Hour
	// MinTTL is the shortest certificate a CA issues, so rotation is watchable but not a storm.
	MinTTL = time.Second
)

// ErrIdentity is returned when a CSR asks for an identity other than the caller's.
var ErrIdentity = errors.New("csr identity not allowed")

// Identity is a workload's Kubernetes-style identity.
type Identity struct {
	Namespace      string
	ServiceAccount string
}

// SPIFFEID returns spiffe://<trustDomain>/ns/<ns>/sa/<sa>.
func (id Identity) SPIFFEID(trustDomain string) string {
	return (&url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}).String()
}

// CA signs workload certificates with its signing root and hands out its trust bundle.
// Normally the bundle is the signing root alone; during a root rotation (see rotate.go)
// it holds the old and the new root. It is safe for concurrent use.
type CA struct {
	maxTTL time.Duration
	now    func() time.Time

	mu          sync.RWMutex
	trustDomain string              // of the identities issued; the mesh config's (SetTrustDomain)
	root        *Root               // the signing root
	inter       []*x509.Certificate // sent between the leaf and the bundle: the cross-signed new root, or a plugged-in cert-chain.pem
	bundle      []*x509.Certificate // the trusted roots, oldest first
	pending     *Root               // the new root while a rotation is under way
	phase       string              // Phase*
	plugged     bool                // root is a plugged-in intermediate and inter its cert-chain.pem (Plug)
	offset      time.Duration       // added to now() for NotBefore/NotAfter (fault injection)
}

// Options configure a CA.
type Options struct {
	Root        *Root            // required
	TrustDomain string           // optional, DefaultTrustDomain
	TTL         time.Duration    // optional: the longest (and default) certificate lifetime, DefaultTTL
	Now         func() time.Time // optional, time.Now
}

// New returns a CA signing with o.Root.
func New(o Options) (*CA, error) {
	if o.Root == nil {
		return nil, errors.New("new CA: Options.Root is required")
	}
	if o.TrustDomain == "" {
		o.TrustDomain = DefaultTrustDomain
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < MinTTL {
		return nil, fmt.Errorf("new CA: ttl %s is below the minimum %s", o.TTL, MinTTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &CA{root: o.Root, trustDomain: o.TrustDomain, maxTTL: o.TTL, now: o.Now,
		bundle: []*x509.Certificate{o.Root.Cert}, phase: PhaseStable}, nil
}

// TrustDomain returns the trust domain of the SPIFFE IDs the CA issues.
func (c *CA) TrustDomain() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.trustDomain
}

// SetTrustDomain makes td ("" for DefaultTrustDomain) the trust domain of the
// certificates issued from now on. istiod's CA names the caller's identity in the mesh
// config's trust domain as it reads it when signing, so a changed meshConfig.trustDomain
// reaches each workload at its next certificate; the ones issued stay valid (the root is
// the same).
func (c *CA) SetTrustDomain(td string) {
	if td == "" {
		td = DefaultTrustDomain
	}
	c.mu.Lock()
	c.trustDomain = td
	c.mu.Unlock()
}

// RootPEM returns the signing root certificate as PEM; for a plugged-in CA, which signs
// with an intermediate, its roots (root-cert.pem).
func (c *CA) RootPEM() []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.plugged {
		var out []byte
		for _, r := range c.bundle {
			out = append(out, pemCert(r.Raw)...)
		}
		return out
	}
	return c.root.CertPEM()
}

// Sign verifies csrPEM and returns the PEM chain of a certificate for id: the leaf, the
// intermediates (during a rotation, the new root cross-signed by the old one) and then
// the trust bundle's self-signed roots, as [leaf, root] is Istio's chain with one root.
// The agent serves the whole chain as its "default" certificate chain, as Istio's agent
// does, and the trailing self-signed roots as "ROOTCA".
// The CSR's only SAN must be id's SPIFFE ID (no DNS names, IPs or e-mails) in any trust
// domain: the certificate names id in the CA's trust domain, as istiod's CA names the
// caller's identity whatever the CSR asks (an agent started before a trust domain
// migration asks for the old one). ttl 0 or one longer than the CA's TTL gets the CA's
// TTL, as Istio caps it at the max.
func (c *CA) Sign(csrPEM []byte, id Identity, ttl time.Duration) ([]string, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("sign csr: no PEM CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sign csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("sign csr: check signature: %w", err)
	}
	td := c.TrustDomain()
	if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses) > 0 || len(csr.URIs) != 1 || !namesIdentity(csr.URIs[0], id) {
		return nil, fmt.Errorf("sign csr: %w: want only URI SAN %s, got %s", ErrIdentity, id.SPIFFEID(td), describeSANs(csr))
	}
	issued, err := url.Parse(id.SPIFFEID(td))
	if err != nil {
		return nil, fmt.Errorf("sign csr: %w", err)
	}
	if ttl <= 0 || ttl > c.maxTTL {
		ttl = c.maxTTL
	}
	if ttl < MinTTL {
		ttl = MinTTL
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	// X.509 times have whole seconds: NotBefore rounds down and NotAfter up, so a
	// certificate lives at least ttl (what matters for TTLs of seconds). No backdating as
	// Istio's: one machine, one clock. The clock offset shifts both (fault injection).
	c.mu.RLock()
	signer, inter, bundle := c.root, c.inter, c.bundle
	now := c.now().Add(c.offset)
	c.mu.RUnlock()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             now.Truncate(time.Second),
		NotAfter:              now.Add(ttl + time.Second - 1).Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{issued},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, csr.PublicKey, signer.Key)
	if err != nil {
		return nil, fmt.Errorf("sign csr: %w", err)
	}
	chain := []string{pemCert(der)}
	for _, ic := range inter {
		chain = append(chain, pemCert(ic.Raw))
	}
	for _, r := range bundle {
		chain = append(chain, pemCert(r.Raw))
	}
	return chain, nil
}

// namesIdentity reports whether u is id's SPIFFE ID in some trust domain.
func namesIdentity(u *url.URL, id Identity) bool {
	got, _, err := ParseSPIFFEID(u.String())
	return err == nil && got == id
}

// pemCert encodes one DER certificate as PEM.
func pemCert(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// describeSANs lists a CSR's SANs for an error message.
func describeSANs(csr *x509.CertificateRequest) string {
	var s []string
	for _, u := range csr.URIs {
		s = append(s, "URI:"+u.String())
	}
	for _, d := range csr.DNSNames {
		s = append(s, "DNS:"+d)
	}
	for _, ip := range csr.IPAddresses {
		s = append(s, "IP:"+ip.String())
	}
	for _, e := range csr.EmailAddresses {
		s = append(s, "email:"+e)
	}
	return fmt.Sprint(s)
}
