package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// IstiodDebugger reaches the debug endpoints of the lab's istiod (`up
// --control-plane=istiod`). Safe for concurrent use; it returns api.ErrNoIstiod when the
// lab runs meshlab's generator, and honours ctx.
type IstiodDebugger interface {
	// IstiodDebug returns the body of istiod's /debug/<endpoint>?<query>.
	IstiodDebug(ctx context.Context, endpoint, query string) ([]byte, error)
}

// istiodEndpoint is the form of an istiod debug endpoint's name (syncz, config_dump,
// push_status, ...): nothing that could leave /debug/.
var istiodEndpoint = regexp.MustCompile(`^[a-z_]+$`)

// IstiodRoutes serves GET /v1/istiod/debug/:endpoint?query: istiod's own debug endpoint,
// its query passed on, answered when istiod's answer is JSON (every endpoint istioctl x
// internal-debug reads is).
func IstiodRoutes(b IstiodDebugger) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/istiod/debug/:endpoint", func(c *gin.Context) {
			ep := c.Param("endpoint")
			if !istiodEndpoint.MatchString(ep) {
				c.JSON(http.StatusBadRequest, gin.H{"error": "istiod debug endpoint " + ep + ": want a name such as syncz, config_dump or push_status"})
				return
			}
			body, err := b.IstiodDebug(c.Request.Context(), ep, c.Request.URL.RawQuery)
			if err != nil {
				code := http.StatusBadGateway
				switch {
				case errors.Is(err, api.ErrNoIstiod):
					code = http.StatusConflict
				case errors.Is(err, context.DeadlineExceeded):
					code = http.StatusGatewayTimeout
				}
				c.JSON(code, gin.H{"error": err.Error()})
				return
			}
			if !json.Valid(body) {
				c.JSON(http.StatusBadGateway, gin.H{"error": "istiod's /debug/" + ep + " is not JSON"})
				return
			}
			c.Data(http.StatusOK, "application/json", body)
		})
	}
}

// ControlPlaneRestarter restarts the lab's control plane (`rollout restart deployment
// istiod`). Safe for concurrent use; it returns once the restart is under way (the
// proxies reconnect on their own) and honours ctx.
type ControlPlaneRestarter interface {
	RestartControlPlane(ctx context.Context) (api.ControlPlaneRestart, error)
}

// ControlPlaneRoutes serves POST /v1/controlplane/restart.
func ControlPlaneRoutes(b ControlPlaneRestarter) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.POST("/controlplane/restart", func(c *gin.Context) {
			out, err := b.RestartControlPlane(c.Request.Context())
			if err != nil {
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
				return
			}
			c.JSON(http.StatusOK, out)
		})
	}
}
