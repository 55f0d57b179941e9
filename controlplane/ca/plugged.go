package ca

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// The files of Istio's plugged-in CA, the keys of the cacerts Secret in istio-system
// (Istio's tools/certs Makefiles make them, one intermediate per cluster under a common
// root).
const (
	PluggedCertFile  = "ca-cert.pem"    // the signing (intermediate) certificate
	PluggedKeyFile   = "ca-key.pem"     // its key
	PluggedChainFile = "cert-chain.pem" // the signing certificate's chain up to the root
	PluggedRootFile  = "root-cert.pem"  // the roots the mesh trusts
)

// Plugged is Istio's plugged-in CA material: an intermediate that signs, its chain and
// the roots, as istiod reads them from /etc/cacerts (NewVerifiedKeyCertBundleFromPem).
type Plugged struct {
	Signing *Root
	// Chain is cert-chain.pem as written (for tools/certs: the intermediate, then the
	// root): istiod sends it after every leaf, before the root, so a workload's chain is
	// [leaf, chain..., root].
	Chain []*x509.Certificate
	Roots []*x509.Certificate // root-cert.pem: the trust bundle
}

// ParsePlugged reads the four files of a cacerts Secret (files holds them by name) and
// checks them as istiod does before it signs with them: the certificate is a CA matching
// its key, and it verifies up to a root of root-cert.pem through cert-chain.pem. A
// missing file or a bad one is named.
func ParsePlugged(files map[string][]byte, now time.Time) (*Plugged, error) {
	for _, f := range []string{PluggedCertFile, PluggedKeyFile, PluggedChainFile, PluggedRootFile} {
		if len(bytes.TrimSpace(files[f])) == 0 {
			return nil, fmt.Errorf("%s: missing or empty (a plugged-in CA has %s, %s, %s and %s)", f, PluggedCertFile, PluggedKeyFile, PluggedChainFile, PluggedRootFile)
		}
	}
	signing, err := ParseRoot(files[PluggedCertFile], files[PluggedKeyFile])
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", PluggedCertFile, PluggedKeyFile, err)
	}
	chain, err := parseCerts(files[PluggedChainFile])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PluggedChainFile, err)
	}
	roots, err := parseCerts(files[PluggedRootFile])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PluggedRootFile, err)
	}
	rootPool, interPool := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		rootPool.AddCert(r)
	}
	for _, c := range chain {
		interPool.AddCert(c)
	}
	if _, err := signing.Cert.Verify(x509.VerifyOptions{Roots: rootPool, Intermediates: interPool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%s does not verify up to %s through %s: %w", PluggedCertFile, PluggedRootFile, PluggedChainFile, err)
	}
	return &Plugged{Signing: signing, Chain: chain, Roots: roots}, nil
}

// parseCerts reads every PEM certificate of data (at least one).
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return out, nil
}

// ErrPlugged is returned for a root rotation of a CA that signs with a plugged-in
// intermediate: its roots are the user's, changed through the cacerts Secret.
var ErrPlugged = errors.New("the CA signs with a plugged-in intermediate (the cacerts Secret)")

// Plug makes the CA sign with p's intermediate from now on, as istiod does with a
// cacerts Secret it reads: every certificate it issues is sent as [leaf, p.Chain...,
// p.Roots...] (Istio's CreateCertificate: the leaf, cert-chain.pem, root-cert.pem), and
// p.Roots are the trust bundle. Certificates issued before stay valid under their old
// root; the caller has the agents renew. A rotation under way is refused.
func (c *CA) Plug(p *Plugged) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase != PhaseStable {
		return fmt.Errorf("plug in CA: %w: a rotation is in phase %s", ErrPhase, c.phase)
	}
	c.root, c.inter, c.bundle, c.pending, c.plugged = p.Signing, p.Chain, p.Roots, nil, true
	return nil
}

// PluggedIn reports whether the CA signs with a plugged-in intermediate (Plug).
func (c *CA) PluggedIn() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.plugged
}
