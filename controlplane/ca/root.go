package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"
)

// rootValidity is how long a root made by NewRoot is valid (Istio's self-signed root: 10 years).
const rootValidity = 10 * 365 * 24 * time.Hour

// Root is a CA certificate and its private key: an ECDSA key for the roots the lab
// makes, ECDSA or RSA for one the user supplies (Istio's tools/certs make RSA ones).
type Root struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewRoot makes a self-signed ECDSA P-256 root for trustDomain, valid from now.
func NewRoot(trustDomain string, now time.Time) (*Root, error) {
	return NewNamedRoot(trustDomain, "meshlab root CA", now)
}

// NewNamedRoot is NewRoot with the subject's common name, so that the roots of a
// rotation have different subjects (chain building and people tell them apart).
func NewNamedRoot(trustDomain, commonName string, now time.Time) (*Root, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate root key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{trustDomain}, CommonName: commonName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(rootValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create root certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse root certificate: %w", err)
	}
	return &Root{Cert: cert, Key: key}, nil
}

// LoadRoot reads a PEM CA certificate and its PEM private key (EC or RSA; PKCS#8, SEC 1
// or PKCS#1), as Istio's plugged-in ca-cert.pem and ca-key.pem. The certificate must be
// a CA and match the key.
func LoadRoot(certPath, keyPath string) (*Root, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	return ParseRoot(certPEM, keyPEM)
}

// ParseRoot is LoadRoot on PEM bytes.
func ParseRoot(certPEM, keyPEM []byte) (*Root, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("parse CA certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("parse CA certificate: not a CA (basicConstraints CA:FALSE)")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse CA key: %w", err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("parse CA key: the key does not match the certificate")
	}
	return &Root{Cert: cert, Key: key}, nil
}

// parseKey reads a PEM EC or RSA private key.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("no PEM block")
	}
	switch kb.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(kb.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err != nil {
			return nil, err
		}
		switch k := k.(type) {
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			return k, nil
		default:
			return nil, fmt.Errorf("key is %T, only ECDSA and RSA are supported", k)
		}
	default:
		return nil, fmt.Errorf("unsupported PEM block %q", kb.Type)
	}
}

// CertPEM returns the root certificate as PEM.
func (r *Root) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Cert.Raw})
}

// WriteFiles writes the certificate (0644) and the key (0600, SEC 1 PEM for ECDSA, else
// PKCS#8) to the given paths.
func (r *Root) WriteFiles(certPath, keyPath string) error {
	block := &pem.Block{Type: "PRIVATE KEY"}
	var err error
	if k, ok := r.Key.(*ecdsa.PrivateKey); ok {
		block.Type = "EC PRIVATE KEY"
		block.Bytes, err = x509.MarshalECPrivateKey(k)
	} else {
		block.Bytes, err = x509.MarshalPKCS8PrivateKey(r.Key)
	}
	if err != nil {
		return fmt.Errorf("marshal CA key: %w", err)
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("write CA key: %w", err)
	}
	if err := writeFile(certPath, r.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	return nil
}

// writeFile creates path with mode (not subject to the umask's widening, and re-chmodded
// in case the file existed).
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// randomSerial returns a random positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}
