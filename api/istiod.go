package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// ErrNoIstiod is returned for istiod's own endpoints by a lab whose control plane is
// meshlab's generator (istiod runs only with `up --control-plane=istiod`).
var ErrNoIstiod = sentinel("the lab's control plane is meshlab's generator, not istiod (up --control-plane=istiod)", ErrConflict)

// IstiodDebug returns one of the lab's istiod's debug endpoints as istiod wrote it:
// endpoint is its name with an optional query ("syncz", "config_dump?proxyID=<id>",
// "push_status"), as `istioctl x internal-debug` names them.
func (c *Client) IstiodDebug(ctx context.Context, endpoint string) (json.RawMessage, error) {
	name, query, _ := strings.Cut(strings.TrimPrefix(endpoint, "/debug/"), "?")
	path := "/v1/istiod/debug/" + url.PathEscape(name)
	if query != "" {
		path += "?" + query
	}
	var out json.RawMessage
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}
