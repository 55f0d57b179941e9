// Package hbone is ztunnel's tunnel: HTTP/2 CONNECT over mutual TLS 1.3 on port 15008
// (ALPN h2, no SNI). The client checks the server's SPIFFE identity against the set the
// destination may present; the server requires a client certificate of its trust domain
// and leaves which identity is allowed to RBAC. Connections are pooled by ztunnel's
// WorkloadKey (source identity, destination identities, source IP, destination).
package hbone

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ALPN is the only protocol both sides offer.
const ALPN = "h2"

// verifyChain checks rawCerts (leaf first) against roots and returns the leaf.
func verifyChain(rawCerts [][]byte, roots *x509.CertPool) (*x509.Certificate, error) {
	if len(rawCerts) == 0 {
		return nil, errors.New("peer sent no certificate")
	}
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return nil, fmt.Errorf("parse peer certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("verify peer certificate: %w", err)
	}
	return certs[0], nil
}

// PeerIdentity returns the SPIFFE URI SAN of a certificate ("" if none).
func PeerIdentity(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if u.Scheme == "spiffe" {
			return u.String()
		}
	}
	return ""
}

// ClientConfig is the TLS configuration of an outbound tunnel: cert presents the source
// workload's identity; the server must chain to roots and carry one of sans as its URI
// SAN (the destination's identity, or a service's subject alt name). No SNI, no session
// resumption, TLS 1.3 only, ALPN h2.
func ClientConfig(cert *tls.Certificate, roots *x509.CertPool, sans []string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		NextProtos:         []string{ALPN},
		Certificates:       []tls.Certificate{*cert},
		InsecureSkipVerify: true, //nolint:gosec // verified below against SPIFFE identities, not host names
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := verifyChain(rawCerts, roots)
			if err != nil {
				return err
			}
			id := PeerIdentity(leaf)
			if !slices.Contains(sans, id) {
				return fmt.Errorf("peer identity %q is none of %v", id, sans)
			}
			return nil
		},
	}
}

// ServerConfig is the TLS configuration of a pod's 15008: getCert gives the pod's
// certificate (called per handshake, so a renewal is picked up), roots()/trustDomain check
// the client's certificate, which is required.
func ServerConfig(getCert func() (*tls.Certificate, error), roots func() *x509.CertPool, trustDomain string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		NextProtos: []string{ALPN},
		ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return getCert()
		},
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := verifyChain(rawCerts, roots())
			if err != nil {
				return err
			}
			id := PeerIdentity(leaf)
			if !strings.HasPrefix(id, "spiffe://"+trustDomain+"/") {
				return fmt.Errorf("client identity %q is not of trust domain %s", id, trustDomain)
			}
			return nil
		},
	}
}
