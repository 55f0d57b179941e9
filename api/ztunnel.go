package api

import (
	"context"
	"encoding/json"
	"net/http"
)

// ErrNoZtunnel is returned for a ztunnel view of a lab that runs no ztunnel: none of its
// pods is in ambient mode (or the node agent has not started it). A lab that answers this
// is up and its state says no (a conflict), unlike ErrUnavailable, a lab that does not
// answer.
var ErrNoZtunnel = sentinel("no ztunnel: no pod is in ambient mode", ErrConflict)

// ZtunnelConfigDump returns the lab's ztunnel's admin /config_dump as ztunnel wrote it
// (ztunnel's JSON shape, which `ztunnel-config` and istioctl's writer read).
func (c *Client) ZtunnelConfigDump(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, http.MethodGet, "/v1/ztunnel/config_dump", nil, &out)
}
