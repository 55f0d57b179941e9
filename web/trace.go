package web

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// Tracer traces one request. Safe for concurrent use; ErrUnknownPod (wrapped, naming the
// valid pods) for a pod the lab does not have; errors wrapping ErrBadTraffic are the
// caller's (a target that does not resolve, a pod without a sidecar).
type Tracer interface {
	Trace(ctx context.Context, r api.TraceRequest) (api.TraceResult, error)
}

// TraceRoutes serves POST /v1/trace (a TraceRequest; answers a TraceResult).
func TraceRoutes(t Tracer) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.POST("/trace", sendRequest(t.Trace))
	}
}
