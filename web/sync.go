package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// SyncWaiter waits until the proxies run the lab's current config: every change applied
// so far pushed and, on every open stream of every proxy, what was sent ACKed and
// nothing newer pending (a proxyless pod's app is sent only what it subscribes to, and
// only while its stream is open). It fails at once when a push failed, and with ctx's
// error when ctx ends first. Safe for concurrent use.
type SyncWaiter interface {
	WaitSynced(ctx context.Context) error
}

// maxSyncWait bounds GET /v1/synced's ?timeout.
const maxSyncWait = 10 * time.Minute

// SyncRoutes serves GET /v1/synced?timeout=30s: 200 once the proxies run the lab's
// current config (what `meshlab apply --wait` waits for), 504 when the timeout ends
// first, 409 when a push failed or a proxy rejected its config.
func SyncRoutes(w SyncWaiter) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/synced", func(c *gin.Context) {
			timeout := 30 * time.Second
			if s := c.Query("timeout"); s != "" {
				d, err := time.ParseDuration(s)
				if err != nil || d <= 0 {
					c.JSON(http.StatusBadRequest, gin.H{"error": "timeout: want a positive duration such as 30s, got " + s})
					return
				}
				timeout = min(d, maxSyncWait)
			}
			ctx, cancel := context.WithTimeout(c.Request.Context(), timeout)
			defer cancel()
			if err := w.WaitSynced(ctx); err != nil {
				code := http.StatusConflict
				if ctx.Err() != nil {
					code = http.StatusGatewayTimeout
				}
				c.JSON(code, gin.H{"error": err.Error()})
				return
			}
			c.JSON(http.StatusOK, api.SyncResult{Synced: true})
		})
	}
}
