// Package web serves the lab API and the dashboard: gin handlers over narrow read-only
// backend interfaces (never the lab's concrete types), the dashboard's guard (token, Host
// and Origin checks), SSE and the UI. The wire types and the client live in package api.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// LabReader reads the lab's description. Implementations must be safe for concurrent use.
type LabReader interface {
	Info() api.LabInfo
}

// PodLister lists the lab's pods with their live status; it may block on the agents, and
// must honour ctx. Safe for concurrent use.
type PodLister interface {
	Pods(ctx context.Context) ([]api.PodStatus, error)
}

// NameTableSource hands an agent its pod's DNS name table. It answers at once when the
// table's version differs from version, else blocks until it changes or ctx ends, and
// then answers the current table. ErrUnknownPod for a pod the lab does not have.
type NameTableSource interface {
	NameTable(ctx context.Context, pod string, version uint64) (api.NameTable, error)
}

// Backend is everything the API reads.
type Backend interface {
	LabReader
	PodLister
	NameTableSource
}

// longPollLimit bounds how long a name table request is held open.
const longPollLimit = api.NameTableHold

// Routes registers a group of API endpoints. Each feature (proxy restarts, config apply,
// the dashboard...) lives in its own file with its own narrow backend interface and hands
// NewHandler one of these.
type Routes func(v1 *gin.RouterGroup)

// NewHandler returns the API's HTTP handler: the core endpoints below plus every feature's.
func NewHandler(b Backend, log *slog.Logger, features ...Routes) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), requestLog(log))
	v1 := r.Group("/v1")
	v1.GET("/lab", func(c *gin.Context) { c.JSON(http.StatusOK, b.Info()) })
	v1.GET("/pods", func(c *gin.Context) {
		pods, err := b.Pods(c.Request.Context())
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			return
		}
		c.JSON(http.StatusOK, pods)
	})
	v1.GET("/agents/:pod/nametable", func(c *gin.Context) {
		var version uint64
		if v := c.Query("version"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": "version: " + err.Error()})
				return
			}
			version = n
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), longPollLimit)
		defer cancel()
		t, err := b.NameTable(ctx, c.Param("pod"), version)
		switch {
		case errors.Is(err, api.ErrUnknownPod):
			c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
		case err != nil:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		default:
			c.JSON(http.StatusOK, t)
		}
	})
	for _, f := range features {
		f(v1)
	}
	// Prometheus scrapes /metrics by convention, outside the versioned API.
	if m, ok := b.(MetricsWriter); ok {
		r.GET("/metrics", metricsHandler(m))
	}
	return r
}

func requestLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		log.Debug("api request", "method", c.Request.Method, "path", c.Request.URL.Path,
			"status", c.Writer.Status(), "duration", time.Since(start))
	}
}

// Serve serves h on l until ctx ends, then shuts down, giving open requests (long polls
// included) a second to finish.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}
