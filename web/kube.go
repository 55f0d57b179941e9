package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// KubeSource answers kubectl's view of the lab's objects: kind (any spelling kubectl
// takes), namespace and name ("" for any) and a label selector (kubectl's -l, "" for
// all). A bad kind or selector is an *api.ConfigError. It may ask the agents for
// readiness, so it honours ctx; safe for concurrent use.
type KubeSource interface {
	KubeObjects(ctx context.Context, kind, namespace, name, selector string) ([]api.KubeObject, error)
}

// KubeRoutes serves GET /v1/kube?kind=&namespace=&name=&labelSelector=.
func KubeRoutes(s KubeSource) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/kube", func(c *gin.Context) {
			objs, err := s.KubeObjects(c.Request.Context(), c.Query("kind"), c.Query("namespace"), c.Query("name"), c.Query("labelSelector"))
			var ce *api.ConfigError
			switch {
			case errors.As(err, &ce):
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, objs)
			}
		})
	}
}
