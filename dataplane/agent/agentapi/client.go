package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meshlab/meshlab/dataplane/statstext"
)

// The agent's endpoints on agent.sock (HTTP over a unix socket, 0600).
const (
	PathStatus      = "/status"       // GET: Status
	PathRestart     = "/restart"      // POST: a new epoch with the same settings; RestartResult
	PathProxyConfig = "/proxy-config" // GET: ProxySettings; PUT ProxySettings: RestartResult
	PathCerts       = "/certs"        // GET: CertStatus
	PathCertsRenew  = "/certs/renew"  // POST: renew now; CertStatus (409 paused, 502 CA)
	PathCertsPause  = "/certs/pause"  // POST: stop renewing; CertStatus
	PathCertsResume = "/certs/resume" // POST: renew again; CertStatus
	PathAdmin       = "/admin/"       // GET|POST /admin/<path>?<query>: the proxy's admin API
)

// maxAnswer bounds an answer read whole (a config_dump of a large lab is a few MiB).
const maxAnswer = 64 << 20

// Client talks to one pod's agent over its unix socket: the lab process and the CLI live
// outside the pod's network namespace, and the socket bridges the two. Every answer
// other than 200 is an *Error wrapping its status code's sentinel. Safe for concurrent
// use; Close releases its idle connections.
type Client struct {
	hc *http.Client
}

// NewClient returns a client of the agent listening on the unix socket sock (the pod's
// agent.sock). It dials on each request, so the agent need not be up yet.
func NewClient(sock string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &Client{hc: &http.Client{Transport: tr}}
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Status is GET /status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	return st, c.call(ctx, http.MethodGet, PathStatus, nil, &st)
}

// WaitReady is GET /status?wait=ready: the status once the pod is ready or its proxy
// failed, or as it is after wait (the agent bounds it at 60 s); ctx's deadline ends it
// sooner.
func (c *Client) WaitReady(ctx context.Context, wait time.Duration) (Status, error) {
	var st Status
	return st, c.call(ctx, http.MethodGet, PathStatus+"?wait=ready&timeout="+url.QueryEscape(wait.String()), nil, &st)
}

// Restart is POST /restart: a new epoch with the current settings, started once the
// current one is live. ErrStopping while the agent stops.
func (c *Client) Restart(ctx context.Context) (RestartResult, error) {
	var res RestartResult
	return res, c.call(ctx, http.MethodPost, PathRestart, nil, &res)
}

// ProxyConfig is GET /proxy-config: the settings new epochs start with.
func (c *Client) ProxyConfig(ctx context.Context) (ProxySettings, error) {
	var s ProxySettings
	return s, c.call(ctx, http.MethodGet, PathProxyConfig, nil, &s)
}

// SetProxyConfig is PUT /proxy-config: settings that differ start a new epoch, equal
// ones are a no-op (RestartResult.Restarted false). ErrBadRequest when they do not
// validate.
func (c *Client) SetProxyConfig(ctx context.Context, s ProxySettings) (RestartResult, error) {
	var res RestartResult
	return res, c.call(ctx, http.MethodPut, PathProxyConfig, s, &res)
}

// Cert is GET /certs: the workload certificate.
func (c *Client) Cert(ctx context.Context) (CertStatus, error) {
	var st CertStatus
	return st, c.call(ctx, http.MethodGet, PathCerts, nil, &st)
}

// RenewCert is POST /certs/renew: a new certificate now, with the CA's current trust
// bundle, pushed over SDS before it answers. ErrRenewalPaused while renewal is paused,
// ErrUpstream when the CA refuses or cannot be reached.
func (c *Client) RenewCert(ctx context.Context) (CertStatus, error) {
	var st CertStatus
	return st, c.call(ctx, http.MethodPost, PathCertsRenew, nil, &st)
}

// PauseRenewal is POST /certs/pause (paused) or /certs/resume.
func (c *Client) PauseRenewal(ctx context.Context, paused bool) (CertStatus, error) {
	path := PathCertsResume
	if paused {
		path = PathCertsPause
	}
	var st CertStatus
	return st, c.call(ctx, http.MethodPost, path, nil, &st)
}

// Admin is GET /admin/<pathQuery> ("stats?filter=x", "config_dump"): the proxy's admin
// API through the agent. The caller closes the body.
func (c *Client) Admin(ctx context.Context, pathQuery string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, PathAdmin+strings.TrimPrefix(pathQuery, "/"), nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// AdminBytes is Admin read whole (at most 64 MiB).
func (c *Client) AdminBytes(ctx context.Context, pathQuery string) ([]byte, error) {
	body, err := c.Admin(ctx, pathQuery)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("read admin /%s: %w", strings.TrimPrefix(pathQuery, "/"), err)
	}
	return b, nil
}

// AdminPost is POST /admin/<pathQuery> ("logging?rbac=debug"): a change through the
// proxy's admin API, its answer read whole (at most 64 MiB).
func (c *Client) AdminPost(ctx context.Context, pathQuery string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodPost, PathAdmin+strings.TrimPrefix(pathQuery, "/"), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("read admin /%s: %w", strings.TrimPrefix(pathQuery, "/"), err)
	}
	return b, nil
}

// Stats is the proxy's text /stats through the agent, parsed; filter is an RE2 the
// names must match ("" for every stat), sent as Envoy's ?filter=.
func (c *Client) Stats(ctx context.Context, filter string) (statstext.Stats, error) {
	return c.stats(ctx, filter, false)
}

// UsedStats is Stats of the stats ever updated only (Envoy's ?usedonly): what a sum of
// counters needs, and a pass over the proxy's stats instead of a match of every name.
func (c *Client) UsedStats(ctx context.Context, filter string) (statstext.Stats, error) {
	return c.stats(ctx, filter, true)
}

func (c *Client) stats(ctx context.Context, filter string, usedOnly bool) (statstext.Stats, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	if usedOnly {
		q.Set("usedonly", "")
	}
	pq := "stats"
	if len(q) > 0 {
		pq += "?" + q.Encode()
	}
	body, err := c.Admin(ctx, pq)
	if err != nil {
		return statstext.Stats{}, err
	}
	defer body.Close()
	return statstext.Parse(body)
}

// call sends in (nil: no body) as JSON and decodes the JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = b
	}
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// do sends one request and returns a 200 answer; any other status is an *Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	var answer struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &answer) == nil && answer.Error != "" {
		msg = answer.Error
	}
	return nil, &Error{Method: method, Path: strings.SplitN(path, "?", 2)[0], Code: resp.StatusCode, Message: msg}
}
