package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// CABackend is the lab's CA as the API drives it. Safe for concurrent use.
type CABackend interface {
	CAStatus(ctx context.Context) (api.CAStatus, error)
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
			var req api.CARotateRequest
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
			var req api.CAClockRequest
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
	case errors.Is(err, api.ErrUnknownPod):
		code = http.StatusNotFound
	case errors.Is(err, api.ErrCARequest), errors.Is(err, api.ErrNoSidecar):
		code = http.StatusBadRequest
	}
	c.JSON(code, gin.H{"error": err.Error()})
}
