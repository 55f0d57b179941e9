package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// ServiceDescriber describes one Service of the lab (namespace "" for any) from the
// model its proxies' config is generated from; api.ErrUnknownService for a name it does
// not have, api.ErrInvalid for a name in several namespaces when namespace is "". It
// may ask a client proxy for its endpoints, so it honours ctx; safe for concurrent use.
type ServiceDescriber interface {
	DescribeService(ctx context.Context, namespace, name string) (api.ServiceView, error)
}

// ServiceRoutes serves GET /v1/services/:name?namespace=NS.
func ServiceRoutes(src ServiceDescriber) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/services/:name", func(c *gin.Context) {
			v, err := src.DescribeService(c.Request.Context(), c.Query("namespace"), c.Param("name"))
			switch {
			case errors.Is(err, api.ErrNotFound):
				c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
			case errors.Is(err, api.ErrInvalid):
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, v)
			}
		})
	}
}
