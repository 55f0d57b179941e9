package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// ProxySecret is one secret a proxy holds, as its admin /config_dump lists it under
// dynamic_active_secrets (the secrets its agent served it over SDS).
type ProxySecret struct {
	Name        string    `json:"name"`        // "default" (the workload certificate) or "ROOTCA"
	Kind        string    `json:"kind"`        // "certificate" (tls_certificate) or "validation" (validation_context)
	Version     string    `json:"version"`     // version_info: the agent sends the certificate's serial
	LastUpdated time.Time `json:"lastUpdated"` // when the proxy took it
}

// PodSecrets is the SDS state of one pod's proxy: the secrets it holds, or why they could
// not be read.
type PodSecrets struct {
	Pod     string        `json:"pod"`
	Secrets []ProxySecret `json:"secrets"`
	Error   string        `json:"error,omitempty"`
}

// ProxySecretsReader reads every sidecar's secrets from the proxies themselves. It asks
// each proxy's admin API (through its agent), may block on them and must honour ctx.
// Safe for concurrent use.
type ProxySecretsReader interface {
	ProxySecrets(ctx context.Context) []PodSecrets
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

// ProxySecrets returns every sidecar's secrets, read from the proxies.
func (c *Client) ProxySecrets(ctx context.Context) ([]PodSecrets, error) {
	var out []PodSecrets
	return out, c.get(ctx, "/v1/proxy-secrets", &out)
}
