package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/dataplane/agent"
)

// PodInspection is everything the dashboard's pod page shows about one pod.
type PodInspection struct {
	Pod string `json:"pod"`
	// Agent is the agent's status (epochs, restarts); nil for a pod without a sidecar
	// or when the agent did not answer (AgentError says why).
	Agent      *agent.Status `json:"agent,omitempty"`
	AgentError string        `json:"agentError,omitempty"`
	// Capture is `iptables-save -c -t nat` in the pod's namespace: the capture rules with
	// their comments and packet/byte counters.
	Capture      string `json:"capture"`
	CaptureError string `json:"captureError,omitempty"`
	// XDS is the discovery server's view of the pod's proxy, one entry per type URL.
	XDSConnected bool           `json:"xdsConnected"`
	XDS          []XDSTypeState `json:"xds"`
	// Logs holds the last lines of the pod's proxy, app and agent logs, by name.
	Logs map[string][]string `json:"logs"`
}

// XDSTypeState is one resource type as the discovery server sent it to a proxy.
type XDSTypeState struct {
	TypeURL   string     `json:"typeUrl"`
	Sent      string     `json:"sent"`  // version last sent
	Acked     string     `json:"acked"` // version the proxy last applied
	Nonce     string     `json:"nonce"`
	Synced    bool       `json:"synced"`              // Sent == Acked
	NackError string     `json:"nackError,omitempty"` // the last NACK's error, kept as history
	LastNack  *time.Time `json:"lastNack,omitempty"`
}

// PodInspector reads one pod's details. Safe for concurrent use; ErrUnknownPod for a
// pod the lab does not have.
type PodInspector interface {
	InspectPod(ctx context.Context, pod string, logLines int) (PodInspection, error)
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
			case errors.Is(err, ErrUnknownPod):
				c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, pi)
			}
		})
	}
}
