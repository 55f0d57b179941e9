package api

import (
	"context"
	"net/url"
	"strconv"
)

// InspectPod reads one pod's inspection (GET /v1/pods/:pod/inspect?lines=N).
func (c *Client) InspectPod(ctx context.Context, pod string, lines int) (PodInspection, error) {
	var out PodInspection
	err := c.get(ctx, "/v1/pods/"+url.PathEscape(pod)+"/inspect?lines="+strconv.Itoa(lines), &out)
	return out, err
}
