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

// ControlPlaneRestart is what a restart of the lab's control plane did (`rollout restart
// deployment istiod -n istio-system`).
type ControlPlaneRestart struct {
	// ControlPlane is "meshlab" (the lab's own discovery server and CA) or "istiod".
	ControlPlane string `json:"controlPlane"`
	// Streams is how many xDS streams were open and ended: each proxy reconnects.
	Streams int `json:"streams"`
	// TrustDomain is the trust domain the CA issues certificates in after the restart.
	TrustDomain string `json:"trustDomain"`
}

// RestartControlPlane restarts the lab's control plane as a rollout restart of istiod
// does: it rereads the mesh config and every proxy's xDS stream ends, so each proxy
// reconnects and is sent its config afresh; certificates stay until their agents renew
// them (the root is the same).
func (c *Client) RestartControlPlane(ctx context.Context) (ControlPlaneRestart, error) {
	var out ControlPlaneRestart
	return out, c.do(ctx, http.MethodPost, "/v1/controlplane/restart", nil, &out)
}
