package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// PodInspector reads one pod's details. Safe for concurrent use; ErrUnknownPod for a
// pod the lab does not have.
type PodInspector interface {
	InspectPod(ctx context.Context, pod string, logLines int) (api.PodInspection, error)
}

// maxLogLines bounds ?lines= of the inspection.
const maxLogLines = 1000

// InspectRoutes serves GET /v1/pods/:pod/inspect?lines=N (N log lines, default 50).
func InspectRoutes(src PodInspector) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/pods/:pod/inspect", func(c *gin.Context) {
			lines := 50
			if v := c.Query("lines"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || n > maxLogLines {
					c.JSON(http.StatusBadRequest, gin.H{"error": "lines: want 0.." + strconv.Itoa(maxLogLines)})
					return
				}
				lines = n
			}
			pi, err := src.InspectPod(c.Request.Context(), c.Param("pod"), lines)
			switch {
			case errors.Is(err, api.ErrUnknownPod):
				c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, pi)
			}
		})
	}
}
