package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"
)

// MaxTrafficRequests bounds TrafficRequest.N.
const MaxTrafficRequests = 1000

// TrafficRequest asks the lab to send N HTTP GETs to URL from inside Pod's namespace, as
// the pod's app would (captured, so through its sidecar).
type TrafficRequest struct {
	Pod string `json:"pod"`
	URL string `json:"url"`
	N   int    `json:"n"`
}

// Validate checks the request: a known-shape http URL and 1..MaxTrafficRequests.
func (r TrafficRequest) Validate() error {
	if r.Pod == "" {
		return errors.New("pod: required")
	}
	if r.N < 1 || r.N > MaxTrafficRequests {
		return fmt.Errorf("n: want 1..%d, got %d", MaxTrafficRequests, r.N)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil {
		return fmt.Errorf("url: want http://host[:port]/path, got %q", r.URL)
	}
	return nil
}

// TrafficResult summarises the answers.
type TrafficResult struct {
	Sent     int            `json:"sent"`
	Statuses map[string]int `json:"statuses"` // by status code; "error" for no answer
	// Pods counts answers by the demo app's "pod" field ("" when the body had none).
	Pods map[string]int `json:"pods"`
	// Latency percentiles and maximum, in milliseconds.
	P50Ms  float64  `json:"p50Ms"`
	P90Ms  float64  `json:"p90Ms"`
	P99Ms  float64  `json:"p99Ms"`
	MaxMs  float64  `json:"maxMs"`
	Errors []string `json:"errors,omitempty"` // the first few transport errors
}

// TrafficSender sends test traffic. Safe for concurrent use; ErrUnknownPod for a pod the
// lab does not have; errors wrapping ErrBadTraffic are the caller's fault.
type TrafficSender interface {
	SendTraffic(ctx context.Context, r TrafficRequest) (TrafficResult, error)
}

// ErrBadTraffic marks a traffic request the lab cannot send (unknown host, no sidecar...).
var ErrBadTraffic = errors.New("bad traffic request")

// TrafficRoutes serves POST /v1/traffic.
func TrafficRoutes(s TrafficSender) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.POST("/traffic", func(c *gin.Context) {
			var r TrafficRequest
			if err := c.ShouldBindJSON(&r); err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": "decode request: " + err.Error()})
				return
			}
			if err := r.Validate(); err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
				return
			}
			res, err := s.SendTraffic(c.Request.Context(), r)
			switch {
			case errors.Is(err, ErrUnknownPod):
				c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
			case errors.Is(err, ErrBadTraffic):
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, res)
			}
		})
	}
}
