package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"
)

// DNSCert is a certificate for DNS names with its key, as istiod's DNS certificate
// controller (Chiron) kept them in Secrets: cert-chain.pem, key.pem and root-cert.pem.
type DNSCert struct {
	ChainPEM []byte // the certificate, then any intermediates of the CA
	KeyPEM   []byte // its key, PKCS#8
	RootPEM  []byte // the CA's roots
}

// SignDNS makes a key and a certificate whose SANs are dnsNames (the first is also its
// common name), valid for ttl, server and client auth: the DNS certificates Chiron had
// the cluster's CA sign for meshConfig.certificates. The lab's CA stands for the
// Kubernetes CA a lab does not have.
func (c *CA) SignDNS(dnsNames []string, ttl time.Duration) (*DNSCert, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("sign dns certificate: no DNS names")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sign dns certificate: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	signer, inter, bundle := c.root, c.inter, c.bundle
	now := c.now().Add(c.offset)
	c.mu.RUnlock()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: dnsNames[0]},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, &key.PublicKey, signer.Key)
	if err != nil {
		return nil, fmt.Errorf("sign dns certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sign dns certificate: %w", err)
	}
	out := &DNSCert{ChainPEM: []byte(pemCert(der)), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
	for _, ic := range inter {
		if !slices.ContainsFunc(bundle, ic.Equal) { // the roots go in root-cert.pem
			out.ChainPEM = append(out.ChainPEM, pemCert(ic.Raw)...)
		}
	}
	for _, r := range bundle {
		out.RootPEM = append(out.RootPEM, pemCert(r.Raw)...)
	}
	return out, nil
}
