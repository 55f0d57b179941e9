package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
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

// CABackend is the lab's CA as the API drives it. Safe for concurrent use.
type CABackend interface {
	CAStatus(ctx context.Context) (CAStatus, error)
	// RotateRootWith rotates to the given root (nil: a new one the lab makes).
	RotateRootWith(ctx context.Context, certPEM, keyPEM []byte) error
	SetCAClockOffset(d time.Duration)
	// RenewCerts has every agent whose renewal is not paused renew now.
	RenewCerts(ctx context.Context) error
	PauseCertRenewal(pod string, paused bool) error
}

// CARoutes serves the CA: GET /v1/ca, POST /v1/ca/rotate-root, POST /v1/ca/clock and
// POST /v1/pods/:pod/certs/pause|resume.
func CARoutes(b CABackend) Routes {
	return func(v1 *gin.RouterGroup) {
		status := func(c *gin.Context) {
			st, err := b.CAStatus(c.Request.Context())
			if err != nil {
				caError(c, err)
				return
			}
			c.JSON(http.StatusOK, st)
		}
		v1.GET("/ca", status)
		v1.POST("/ca/rotate-root", func(c *gin.Context) {
			var req CARotateRequest
			if err := c.ShouldBindJSON(&req); err != nil && !errors.Is(err, io.EOF) {
				c.JSON(http.StatusBadRequest, gin.H{"error": "decode request: " + err.Error()})
				return
			}
			var cert, key []byte
			if req.CertPEM != "" || req.KeyPEM != "" {
				cert, key = []byte(req.CertPEM), []byte(req.KeyPEM)
			}
			if err := b.RotateRootWith(c.Request.Context(), cert, key); err != nil {
				caError(c, err)
				return
			}
			status(c)
		})
		v1.POST("/ca/clock", func(c *gin.Context) {
			var req CAClockRequest
			if err := c.ShouldBindJSON(&req); err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": "decode request: " + err.Error()})
				return
			}
			d, err := time.ParseDuration(req.Offset)
			if err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": "offset: " + err.Error()})
				return
			}
			b.SetCAClockOffset(d)
			if req.Renew {
				if err := b.RenewCerts(c.Request.Context()); err != nil {
					caError(c, err)
					return
				}
			}
			status(c)
		})
		for verb, paused := range map[string]bool{"pause": true, "resume": false} {
			v1.POST("/pods/:pod/certs/"+verb, func(c *gin.Context) {
				if err := b.PauseCertRenewal(c.Param("pod"), paused); err != nil {
					caError(c, err)
					return
				}
				c.JSON(http.StatusOK, gin.H{"pod": c.Param("pod"), "paused": paused})
			})
		}
	}
}

func caError(c *gin.Context, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrUnknownPod):
		code = http.StatusNotFound
	case errors.Is(err, ErrCARequest), errors.Is(err, ErrNoSidecar):
		code = http.StatusBadRequest
	}
	c.JSON(code, gin.H{"error": err.Error()})
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
