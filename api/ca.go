package api

import (
	"time"
)

// ErrCARequest is returned for a CA operation the lab refuses as asked (e.g. rotating a
// user-supplied root without the new one, or while another rotation runs).
var ErrCARequest = sentinel("invalid CA request", ErrInvalid)

// CertTrust is what a workload certificate chains to, as its agent reports it.
type CertTrust struct {
	Issuer        string    `json:"issuer,omitempty"`      // the issuer's common name
	IssuerKeyID   string    `json:"issuerKeyID,omitempty"` // the leaf's authority key id, hex
	Intermediates []CARef   `json:"intermediates,omitempty"`
	TrustBundle   []CARef   `json:"trustBundle,omitempty"` // the ROOTCA secret the pod verifies peers with
	Paused        bool      `json:"paused"`                // renewal paused
	ErrorAt       time.Time `json:"errorAt,omitzero"`      // when the last renewal failed
}

// CARef names one CA certificate.
type CARef struct {
	Serial   string    `json:"serial"`
	Subject  string    `json:"subject"`
	KeyID    string    `json:"keyID,omitempty"`
	NotAfter time.Time `json:"notAfter"`
	Signing  bool      `json:"signing,omitempty"` // the root that signs new certificates
}

// CAPodCert is one pod's current certificate in CAStatus.
type CAPodCert struct {
	Pod         string    `json:"pod"`
	Serial      string    `json:"serial,omitempty"`
	NotAfter    time.Time `json:"notAfter,omitzero"`
	IssuingRoot string    `json:"issuingRoot"` // the serial of the bundle root whose key signed it, or "unknown"
	Issuer      string    `json:"issuer,omitempty"`
	Bundle      []string  `json:"bundle"` // serials of the roots the pod trusts
	Paused      bool      `json:"paused,omitempty"`
	Error       string    `json:"error,omitempty"`
}

// CAStatus is what GET /v1/ca answers: the lab CA's trust bundle, its signing root, the
// rotation phase and each pod's certificate.
type CAStatus struct {
	TrustDomain  string      `json:"trustDomain"`
	Phase        string      `json:"phase"` // stable, trust-added, signing-switched
	UserSupplied bool        `json:"userSupplied"`
	ClockOffset  string      `json:"clockOffset"`
	Signing      CARef       `json:"signing"`
	Bundle       []CARef     `json:"bundle"`
	CrossSigned  *CARef      `json:"crossSigned,omitempty"`
	Pods         []CAPodCert `json:"pods"`
}

// CARotateRequest is the body of POST /v1/ca/rotate-root: the new root as PEM, or
// nothing for a root the lab makes.
type CARotateRequest struct {
	CertPEM string `json:"certPEM,omitempty"`
	KeyPEM  string `json:"keyPEM,omitempty"`
}

// CAClockRequest is the body of POST /v1/ca/clock.
type CAClockRequest struct {
	Offset string `json:"offset"`          // a Go duration, "0" resets
	Renew  bool   `json:"renew,omitempty"` // have every agent renew at once, so the offset bites now
}
