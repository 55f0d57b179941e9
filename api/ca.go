package api

import (
	"context"
	"errors"
	"net/url"
	"time"
)

// ErrCARequest is returned for a CA operation the lab refuses as asked (e.g. rotating a
// user-supplied root without the new one, or while another rotation runs).
var ErrCARequest = errors.New("invalid CA request")

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

// CAStatus returns the lab CA's status.
func (c *Client) CAStatus(ctx context.Context) (CAStatus, error) {
	var out CAStatus
	return out, c.get(ctx, "/v1/ca", &out)
}

// RotateRoot rotates the lab's root (to certPEM/keyPEM when given) and returns the new status.
func (c *Client) RotateRoot(ctx context.Context, certPEM, keyPEM []byte) (CAStatus, error) {
	var out CAStatus
	return out, c.postJSON(ctx, "/v1/ca/rotate-root", CARotateRequest{CertPEM: string(certPEM), KeyPEM: string(keyPEM)}, &out)
}

// SetCAClock shifts the CA's clock by offset (0 resets) and returns the new status.
func (c *Client) SetCAClock(ctx context.Context, offset time.Duration, renew bool) (CAStatus, error) {
	var out CAStatus
	return out, c.postJSON(ctx, "/v1/ca/clock", CAClockRequest{Offset: offset.String(), Renew: renew}, &out)
}

// PauseCertRenewal pauses (or resumes) a pod agent's certificate renewal.
func (c *Client) PauseCertRenewal(ctx context.Context, pod string, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var out map[string]any
	return c.postJSON(ctx, "/v1/pods/"+url.PathEscape(pod)+"/certs/"+verb, struct{}{}, &out)
}
