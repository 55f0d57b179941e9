package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
)

// Client reads the lab API over its unix socket (the CLI's way in).
type Client struct {
	hc *http.Client
}

// NewUnixClient returns a client for the API served on the unix socket at path.
func NewUnixClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	return &Client{hc: &http.Client{Transport: tr}}
}

// Lab returns the lab's description.
func (c *Client) Lab(ctx context.Context) (LabInfo, error) {
	var out LabInfo
	return out, c.get(ctx, "/v1/lab", &out)
}

// Pods returns every pod with its live status.
func (c *Client) Pods(ctx context.Context) ([]PodStatus, error) {
	var out []PodStatus
	return out, c.get(ctx, "/v1/pods", &out)
}

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://lab"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("query lab API %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("query lab API %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("query lab API %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode lab API %s: %w", path, err)
	}
	return nil
}
