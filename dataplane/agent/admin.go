package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"github.com/meshlab/meshlab/dataplane/statstext"
	"google.golang.org/protobuf/encoding/protojson"
)

// adminTimeout bounds one admin API call; the admin server is local and answers at once.
const adminTimeout = 2 * time.Second

// Real Envoy stat names the readiness check reads.
const (
	statLDSUpdateSuccess = "listener_manager.lds.update_success"
	statCDSUpdateSuccess = "cluster_manager.cds.update_success"
)

// adminClient talks to the proxy's admin API on 127.0.0.1. It is safe for concurrent use.
type adminClient struct {
	base   string // "http://127.0.0.1:15000"
	client *http.Client
}

func newAdminClient(port uint16) adminClient {
	return adminClient{
		base: "http://127.0.0.1:" + strconv.Itoa(int(port)),
		// One kept-alive connection: while an epoch starts its state is read every
		// startPollInterval, and a new TCP connection for each read cost the agent and
		// the proxy more than the read itself. Run closes it (close).
		client: &http.Client{Timeout: adminTimeout, Transport: &http.Transport{
			MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second,
		}},
	}
}

// close closes the idle kept-alive connection.
func (a adminClient) close() { a.client.CloseIdleConnections() }

func (a adminClient) do(ctx context.Context, method, pathQuery string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+pathQuery, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build admin request %s: %w", pathQuery, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("call admin %s: %w", pathQuery, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("read admin %s: %w", pathQuery, err)
	}
	return resp.StatusCode, body, nil
}

// serverInfo returns GET /server_info parsed as envoy.admin.v3.ServerInfo.
func (a adminClient) serverInfo(ctx context.Context) (*adminv3.ServerInfo, error) {
	code, body, err := a.do(ctx, http.MethodGet, "/server_info")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("get admin /server_info: status %d", code)
	}
	var si adminv3.ServerInfo
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &si); err != nil {
		return nil, fmt.Errorf("parse admin /server_info: %w", err)
	}
	return &si, nil
}

// state returns the server state in GET /ready's body ("LIVE", "PRE_INITIALIZING",
// "INITIALIZING", "DRAINING"), as Envoy answers it: a short text, far cheaper for both
// sides than /server_info's JSON, but it does not say which epoch answers.
func (a adminClient) state(ctx context.Context) (adminv3.ServerInfo_State, error) {
	text, _, err := a.ready(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := adminv3.ServerInfo_State_value[text]
	if !ok {
		return 0, fmt.Errorf("get admin /ready: unknown server state %q", text)
	}
	return adminv3.ServerInfo_State(v), nil
}

// ready returns the state in GET /ready's body and reports whether it answered 200.
func (a adminClient) ready(ctx context.Context) (string, bool, error) {
	code, body, err := a.do(ctx, http.MethodGet, "/ready")
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(body)), code == http.StatusOK, nil
}

// counters returns the named stats from GET /stats?filter=^(a|b)$; a stat the proxy does
// not have is absent from the map.
func (a adminClient) counters(ctx context.Context, names ...string) (map[string]uint64, error) {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strings.ReplaceAll(n, ".", `\.`)
	}
	filter := "^(" + strings.Join(quoted, "|") + ")$"
	code, body, err := a.do(ctx, http.MethodGet, "/stats?filter="+url.QueryEscape(filter))
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("get admin /stats: status %d", code)
	}
	return statstext.ParseValues(bytes.NewReader(body))
}

// drainListeners asks the proxy to drain its inbound listeners gracefully, as Istio's
// agent does before stopping the proxy.
func (a adminClient) drainListeners(ctx context.Context) error {
	code, body, err := a.do(ctx, http.MethodPost, "/drain_listeners?inboundonly&graceful")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("post admin /drain_listeners: status %d: %s", code, strings.TrimSpace(string(body)))
	}
	return nil
}
