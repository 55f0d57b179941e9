package web

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/common/expfmt"
)

// MetricsWriter writes the lab's metrics in Prometheus' text format: the control plane's
// own and every proxy's stats labelled with its pod, so an existing Prometheus can scrape a
// lab. It may block on the agents and must honour ctx. Safe for concurrent use.
type MetricsWriter interface {
	WriteMetrics(ctx context.Context, w io.Writer) error
}

// metricsHandler serves GET /metrics.
func metricsHandler(m MetricsWriter) gin.HandlerFunc {
	return func(c *gin.Context) {
		var buf bytes.Buffer
		if err := m.WriteMetrics(c.Request.Context(), &buf); err != nil {
			c.String(http.StatusInternalServerError, "collect metrics: %v\n", err)
			return
		}
		c.Data(http.StatusOK, string(expfmt.NewFormat(expfmt.TypeTextPlain)), buf.Bytes())
	}
}
