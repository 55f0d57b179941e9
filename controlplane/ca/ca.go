package ca

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
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

// CA signs workload certificates with one root. It is safe for concurrent use.
type CA struct {
	root        *Root
	trustDomain string
	maxTTL      time.Duration
	now         func() time.Time
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
	return &CA{root: o.Root, trustDomain: o.TrustDomain, maxTTL: o.TTL, now: o.Now}, nil
}

// TrustDomain returns the trust domain of the SPIFFE IDs the CA issues.
func (c *CA) TrustDomain() string { return c.trustDomain }

// RootPEM returns the root certificate as PEM.
func (c *CA) RootPEM() []byte { return c.root.CertPEM() }

// Sign verifies csrPEM and returns the PEM chain [leaf, root] of a certificate for id.
// The CSR's only SAN must be id's SPIFFE ID (no DNS names, IPs or e-mails); ttl 0 or one
// longer than the CA's TTL gets the CA's TTL, as Istio caps it at the max.
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
	want := id.SPIFFEID(c.trustDomain)
	if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses) > 0 || len(csr.URIs) != 1 || csr.URIs[0].String() != want {
		return nil, fmt.Errorf("sign csr: %w: want only URI SAN %s, got %s", ErrIdentity, want, describeSANs(csr))
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
	// Istio's: one machine, one clock.
	now := c.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             now.Truncate(time.Second),
		NotAfter:              now.Add(ttl + time.Second - 1).Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  csr.URIs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.root.Cert, csr.PublicKey, c.root.Key)
	if err != nil {
		return nil, fmt.Errorf("sign csr: %w", err)
	}
	leaf := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return []string{leaf, string(c.RootPEM())}, nil
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
