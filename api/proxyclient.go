package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// PodDetail returns one pod in detail, with its agent's full status.
func (c *Client) PodDetail(ctx context.Context, pod string) (PodDetail, error) {
	var out PodDetail
	return out, c.get(ctx, "/v1/pods/"+url.PathEscape(pod), &out)
}

// RestartProxy starts a new proxy epoch in pod and, when wait is set, waits until it is
// LIVE.
func (c *Client) RestartProxy(ctx context.Context, pod string, wait bool) (ProxyRestart, error) {
	var out ProxyRestart
	path := "/v1/pods/" + url.PathEscape(pod) + "/proxy/restart"
	if !wait {
		path += "?wait=false"
	}
	return out, c.proxyPost(ctx, path, &out)
}

// proxyPost POSTs to path with no body and decodes the answer into out; an error
// answer's message becomes the error.
func (c *Client) proxyPost(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://lab"+path, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("call lab API %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("call lab API %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("call lab API %s: %s", path, e.Error)
		}
		return fmt.Errorf("call lab API %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode lab API %s: %w", path, err)
	}
	return nil
}
