package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// PodDescriber reads one pod in detail. ErrUnknownPod for a pod the lab does not have.
// It may block on the pod's agent and must honour ctx. Safe for concurrent use.
type PodDescriber interface {
	PodDetail(ctx context.Context, pod string) (api.PodDetail, error)
}

// ProxyRestarter starts a new proxy epoch in a pod and, when wait is set, waits until it
// is LIVE. ErrUnknownPod, ErrNoSidecar. Safe for concurrent use.
type ProxyRestarter interface {
	RestartProxy(ctx context.Context, pod string, wait bool) (api.ProxyRestart, error)
}

// ProxyBackend is what the proxy routes need.
type ProxyBackend interface {
	PodDescriber
	ProxyRestarter
}

// restartLimit bounds how long a restart request waits for the new epoch.
const restartLimit = 60 * time.Second

// ProxyRoutes returns the pod and proxy endpoints: GET /v1/pods/:pod and POST
// /v1/pods/:pod/proxy/restart (?wait=false answers once the epoch is started).
func ProxyRoutes(b ProxyBackend) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/pods/:pod", func(c *gin.Context) {
			d, err := b.PodDetail(c.Request.Context(), c.Param("pod"))
			if err != nil {
				writeError(c, err)
				return
			}
			c.JSON(http.StatusOK, d)
		})
		v1.POST("/pods/:pod/proxy/restart", func(c *gin.Context) {
			ctx, cancel := context.WithTimeout(c.Request.Context(), restartLimit)
			defer cancel()
			r, err := b.RestartProxy(ctx, c.Param("pod"), c.Query("wait") != "false")
			if err != nil {
				writeError(c, err)
				return
			}
			c.JSON(http.StatusOK, r)
		})
	}
}

func writeError(c *gin.Context, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, api.ErrUnknownPod):
		code = http.StatusNotFound
	case errors.Is(err, api.ErrNoSidecar):
		code = http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	c.JSON(code, gin.H{"error": err.Error()})
}
