package web

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// HistoryReader reads the control plane's config history of pods. ErrUnknownPod,
// ErrNoSidecar, ErrUnknownVersion. Safe for concurrent use.
type HistoryReader interface {
	PodHistory(pod string) (api.PodHistory, error)
	PodDiff(pod, from, to string) (api.ConfigDiff, error)
}

// HistoryRoutes returns GET /v1/pods/:pod/history and GET /v1/pods/:pod/diff?from=&to=.
func HistoryRoutes(b HistoryReader) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/pods/:pod/history", func(c *gin.Context) {
			h, err := b.PodHistory(c.Param("pod"))
			if err != nil {
				writeHistoryError(c, err)
				return
			}
			c.JSON(http.StatusOK, h)
		})
		v1.GET("/pods/:pod/diff", func(c *gin.Context) {
			d, err := b.PodDiff(c.Param("pod"), c.Query("from"), c.Query("to"))
			if err != nil {
				writeHistoryError(c, err)
				return
			}
			c.JSON(http.StatusOK, d)
		})
	}
}

func writeHistoryError(c *gin.Context, err error) {
	if errors.Is(err, api.ErrUnknownVersion) {
		c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
		return
	}
	writeError(c, err)
}
