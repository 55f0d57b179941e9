package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/dataplane/statstext"
)

// agentClient talks to one pod agent over its unix socket: the lab process lives outside
// the pod's namespace, the socket bridges the two.
type agentClient struct{ hc *http.Client }

func newAgentClient(sock string) *agentClient {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &agentClient{hc: &http.Client{Transport: tr}}
}

func (c *agentClient) close() { c.hc.CloseIdleConnections() }

func (c *agentClient) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

func (c *agentClient) status(ctx context.Context) (agent.Status, error) {
	var st agent.Status
	resp, err := c.get(ctx, "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// stats reads the proxy's counters and gauges (admin /stats, "name: value" lines) whose
// names match the RE2 filter.
func (c *agentClient) stats(ctx context.Context, filter string) (map[string]uint64, error) {
	resp, err := c.get(ctx, "/admin/stats?filter="+filter)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return statstext.ParseValues(resp.Body)
}
