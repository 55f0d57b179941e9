package web

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// TopologySource computes the topology. Safe for concurrent use.
type TopologySource interface {
	// Topology returns the latest topology; it may ask every sidecar and must honour ctx.
	Topology(ctx context.Context) (api.Topology, error)
	// WatchTopology sends a fresh topology about every second until ctx ends, then
	// closes the channel. Sidecar stats are polled only while someone watches.
	WatchTopology(ctx context.Context) <-chan api.Topology
}

// TopologyRoutes serves GET /v1/topology (one snapshot) and GET /v1/topology/stream
// (server-sent events, one snapshot a second).
func TopologyRoutes(src TopologySource) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/topology", func(c *gin.Context) {
			t, err := src.Topology(c.Request.Context())
			if err != nil {
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
				return
			}
			c.JSON(http.StatusOK, t)
		})
		v1.GET("/topology/stream", func(c *gin.Context) {
			ctx, cancel := context.WithCancel(c.Request.Context())
			defer cancel()
			ch := src.WatchTopology(ctx)
			sseStart(c.Writer)
			for t := range ch {
				if sseWrite(c.Writer, "", t) != nil {
					cancel()
					for range ch { //nolint:revive // drain until the source closes
					}
					return
				}
			}
		})
	}
}
