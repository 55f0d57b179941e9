package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// ZtunnelAdmin reads the lab's ztunnel's admin API (127.0.0.1:15000 inside ztunnel's
// network namespace). Safe for concurrent use; it returns api.ErrNoZtunnel when the lab
// runs no ztunnel, and honours ctx.
type ZtunnelAdmin interface {
	// ZtunnelAdminGet returns the body of GET path ("/config_dump") on ztunnel's admin.
	ZtunnelAdminGet(ctx context.Context, path string) ([]byte, error)
}

// ZtunnelRoutes serves GET /v1/ztunnel/config_dump: ztunnel's own /config_dump, passed
// through once it is known to be JSON.
func ZtunnelRoutes(b ZtunnelAdmin) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/ztunnel/config_dump", func(c *gin.Context) {
			body, err := b.ZtunnelAdminGet(c.Request.Context(), "/config_dump")
			if err != nil {
				ztunnelError(c, err)
				return
			}
			if !json.Valid(body) {
				c.JSON(http.StatusBadGateway, gin.H{"error": "ztunnel's /config_dump is not JSON"})
				return
			}
			c.Data(http.StatusOK, "application/json", body)
		})
	}
}

func ztunnelError(c *gin.Context, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, api.ErrNoZtunnel):
		code = http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	c.JSON(code, gin.H{"error": err.Error()})
}
