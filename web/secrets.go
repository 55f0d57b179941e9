package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// ProxySecretsReader reads every sidecar's secrets from the proxies themselves. It asks
// each proxy's admin API (through its agent), may block on them and must honour ctx.
// Safe for concurrent use.
type ProxySecretsReader interface {
	ProxySecrets(ctx context.Context) []api.PodSecrets
}

// proxySecretsLimit bounds one GET /v1/proxy-secrets: a proxy that does not answer in
// time is reported with an error, not waited for.
const proxySecretsLimit = 3 * time.Second

// SecretsRoutes serves GET /v1/proxy-secrets: the SDS column of proxy-status, read from
// the proxies (the discovery server does not serve SDS, the agents do).
func SecretsRoutes(r ProxySecretsReader) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/proxy-secrets", func(c *gin.Context) {
			ctx, cancel := context.WithTimeout(c.Request.Context(), proxySecretsLimit)
			defer cancel()
			c.JSON(http.StatusOK, r.ProxySecrets(ctx))
		})
	}
}
