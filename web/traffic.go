package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// TrafficSender sends test traffic. Safe for concurrent use; ErrUnknownPod for a pod the
// lab does not have; errors wrapping ErrBadTraffic are the caller's fault.
type TrafficSender interface {
	SendTraffic(ctx context.Context, r api.TrafficRequest) (api.TrafficResult, error)
}

// TrafficRoutes serves POST /v1/traffic.
func TrafficRoutes(s TrafficSender) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.POST("/traffic", sendRequest(s.SendTraffic))
	}
}

// sendRequest is the handler of a POST whose JSON body is a request that validates
// itself and is sent from a pod: 400 for a bad request or ErrBadTraffic, 404 for
// ErrUnknownPod.
func sendRequest[Req interface{ Validate() error }, Res any](send func(context.Context, Req) (Res, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		var r Req
		if err := c.ShouldBindJSON(&r); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": "decode request: " + err.Error()})
			return
		}
		if err := r.Validate(); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		res, err := send(c.Request.Context(), r)
		switch {
		case errors.Is(err, api.ErrUnknownPod):
			c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
		case errors.Is(err, api.ErrBadTraffic):
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		case err != nil:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		default:
			c.JSON(http.StatusOK, res)
		}
	}
}
