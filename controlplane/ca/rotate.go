package ca

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Phases of a root rotation, as CA.State reports them. A rotation goes
// PhaseStable → PhaseTrustAdded (AddRoot) → PhaseSigningSwitched (SwitchSigning) →
// PhaseStable (DropOldRoots), Istio's plugged-in root rotation in three steps:
//
//  1. AddRoot: the new root R2 joins the trust bundle {R1, R2}, and R1 cross-signs R2.
//     Leaves are still signed by R1; every certificate issued now carries the bundle,
//     so agents that renew learn to trust R2.
//  2. SwitchSigning: leaves are signed by R2 and sent as [leaf, R2 cross-signed by R1],
//     so a peer that still trusts only R1 verifies them through the cross certificate,
//     and one that trusts R2 directly.
//  3. DropOldRoots: the bundle is {R2} and the chain [leaf]; R1 is gone.
const (
	PhaseStable          = "stable"
	PhaseTrustAdded      = "trust-added"
	PhaseSigningSwitched = "signing-switched"
)

// ErrPhase is returned for a rotation step taken out of order.
var ErrPhase = errors.New("wrong rotation phase")

// RootInfo describes one CA certificate for status output.
type RootInfo struct {
	Serial    string    `json:"serial"`
	Subject   string    `json:"subject"`
	KeyID     string    `json:"keyID"` // subject key identifier, hex: what a leaf's authority key id names
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	Signing   bool      `json:"signing"` // the root that signs new leaves
}

// State is the CA's trust bundle, signing root and rotation phase.
type State struct {
	TrustDomain string        `json:"trustDomain"`
	Phase       string        `json:"phase"`
	Bundle      []RootInfo    `json:"bundle"`
	Signing     RootInfo      `json:"signing"`
	CrossSigned *RootInfo     `json:"crossSigned,omitempty"` // the intermediate leaves carry while PhaseSigningSwitched
	ClockOffset time.Duration `json:"clockOffset"`
}

// Info describes c.
func Info(c *x509.Certificate) RootInfo {
	return RootInfo{Serial: hex.EncodeToString(c.SerialNumber.Bytes()), Subject: c.Subject.CommonName,
		KeyID: hex.EncodeToString(c.SubjectKeyId), NotBefore: c.NotBefore, NotAfter: c.NotAfter}
}

// State returns the CA's current state.
func (c *CA) State() State {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := State{TrustDomain: c.trustDomain, Phase: c.phase, Signing: Info(c.root.Cert), ClockOffset: c.offset}
	st.Signing.Signing = true
	for _, r := range c.bundle {
		i := Info(r)
		i.Signing = r.Equal(c.root.Cert)
		st.Bundle = append(st.Bundle, i)
	}
	if len(c.inter) > 0 && !c.plugged {
		i := Info(c.inter[0])
		st.CrossSigned = &i
	}
	return st
}

// Pending returns the new root of a rotation under way, or nil.
func (c *CA) Pending() *Root {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pending
}

// AddRoot starts a rotation to next (step 1): next joins the trust bundle and the
// signing root cross-signs it. It returns the cross-signed certificate.
func (c *CA) AddRoot(next *Root) (*x509.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase != PhaseStable {
		return nil, fmt.Errorf("add root: %w: a rotation is in phase %s", ErrPhase, c.phase)
	}
	if c.plugged {
		return nil, fmt.Errorf("add root: %w: its roots change with that Secret", ErrPlugged)
	}
	if next.Cert.Equal(c.root.Cert) {
		return nil, errors.New("add root: the new root is the current one")
	}
	cross, err := crossSign(c.root, next)
	if err != nil {
		return nil, err
	}
	c.pending, c.inter = next, []*x509.Certificate{cross}
	c.bundle = append(c.bundle[:len(c.bundle):len(c.bundle)], next.Cert)
	c.phase = PhaseTrustAdded
	return cross, nil
}

// SwitchSigning (step 2) makes the new root sign leaves, sent with its cross-signed
// certificate.
func (c *CA) SwitchSigning() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase != PhaseTrustAdded {
		return fmt.Errorf("switch signing: %w: phase is %s, want %s", ErrPhase, c.phase, PhaseTrustAdded)
	}
	c.root = c.pending
	c.phase = PhaseSigningSwitched
	return nil
}

// DropOldRoots (step 3) ends the rotation: the bundle is the signing root alone and
// leaves carry no cross certificate.
func (c *CA) DropOldRoots() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase != PhaseSigningSwitched {
		return fmt.Errorf("drop old roots: %w: phase is %s, want %s", ErrPhase, c.phase, PhaseSigningSwitched)
	}
	c.bundle, c.inter, c.pending = []*x509.Certificate{c.root.Cert}, nil, nil
	c.phase = PhaseStable
	return nil
}

// crossSign returns next's subject and public key certified by signer: a CA
// certificate that chains next's leaves to signer's root. Its key identifiers are
// next's, so a leaf's authority key id matches both next and the cross certificate.
func crossSign(signer, next *Root) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               next.Cert.Subject,
		SubjectKeyId:          next.Cert.SubjectKeyId,
		NotBefore:             next.Cert.NotBefore,
		NotAfter:              minTime(next.Cert.NotAfter, signer.Cert.NotAfter),
		KeyUsage:              next.Cert.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, next.Key.Public(), signer.Key)
	if err != nil {
		return nil, fmt.Errorf("cross-sign new root: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cross-sign new root: %w", err)
	}
	return cert, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
