package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Client is the one client of the lab API, over the lab's unix socket (the CLI's, the lab
// runner's and repro's way in). Every error answer comes back as an *Error that matches
// its class (ErrNotFound, ErrConflict, ErrInvalid...) with errors.Is and reads as the
// server's message. Safe for concurrent use; Close releases its idle connections.
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

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Lab returns the lab's description.
func (c *Client) Lab(ctx context.Context) (LabInfo, error) {
	var out LabInfo
	return out, c.do(ctx, http.MethodGet, "/v1/lab", nil, &out)
}

// Pods returns every pod with its live status.
func (c *Client) Pods(ctx context.Context) ([]PodStatus, error) {
	var out []PodStatus
	return out, c.do(ctx, http.MethodGet, "/v1/pods", nil, &out)
}

// NameTableHold is how long the lab holds a name-table request whose version is current
// before it answers with the same table. Held requests are an idle agent's only traffic
// to the lab, and each answer wakes the agent and the lab (with 30 s, a third of an idle
// agent's wake-ups, and most of an idle lab's; docs/BENCHMARKS.md, issue 30), where
// Istio's agents get names pushed on their xDS stream with no poll at all.
const NameTableHold = 5 * time.Minute

// NameTable returns the DNS name table the lab serves pod's agent: at once when its
// version differs from version (0 always does), else once it changes (or after
// NameTableHold).
func (c *Client) NameTable(ctx context.Context, pod string, version uint64) (NameTable, error) {
	var out NameTable
	path := "/v1/agents/" + url.PathEscape(pod) + "/nametable?version=" + strconv.FormatUint(version, 10)
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// PodDetail returns one pod in detail, with its agent's full status.
func (c *Client) PodDetail(ctx context.Context, pod string) (PodDetail, error) {
	var out PodDetail
	return out, c.do(ctx, http.MethodGet, "/v1/pods/"+url.PathEscape(pod), nil, &out)
}

// InspectPod reads one pod's inspection with the last lines of each of its logs.
func (c *Client) InspectPod(ctx context.Context, pod string, lines int) (PodInspection, error) {
	var out PodInspection
	path := "/v1/pods/" + url.PathEscape(pod) + "/inspect?lines=" + strconv.Itoa(lines)
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// RestartProxy starts a new proxy epoch in pod and, when wait is set, waits until it is
// LIVE.
func (c *Client) RestartProxy(ctx context.Context, pod string, wait bool) (ProxyRestart, error) {
	var out ProxyRestart
	path := "/v1/pods/" + url.PathEscape(pod) + "/proxy/restart"
	if !wait {
		path += "?wait=false"
	}
	return out, c.do(ctx, http.MethodPost, path, nil, &out)
}

// Apply sends files to the lab as one change and returns what changed.
func (c *Client) Apply(ctx context.Context, files []ConfigFile) ([]Change, error) {
	var out ChangeResult
	return out.Changes, c.do(ctx, http.MethodPost, "/v1/apply", ApplyRequest{Files: files}, &out)
}

// WaitSynced waits, at most timeout, until the proxies run the lab's current config
// (GET /v1/synced): every change applied so far pushed and every proxy SYNCED.
func (c *Client) WaitSynced(ctx context.Context, timeout time.Duration) error {
	var out SyncResult
	return c.do(ctx, http.MethodGet, "/v1/synced?timeout="+url.QueryEscape(timeout.String()), nil, &out)
}

// Delete deletes objects from the lab as one change and returns what changed.
func (c *Client) Delete(ctx context.Context, r DeleteRequest) ([]Change, error) {
	var out ChangeResult
	return out.Changes, c.do(ctx, http.MethodPost, "/v1/delete", r, &out)
}

// Kinds returns the kinds of object the lab holds, with every spelling of each (the
// lab's discovery: GET /v1/kinds).
func (c *Client) Kinds(ctx context.Context) (Kinds, error) {
	var out Kinds
	return out, c.do(ctx, http.MethodGet, "/v1/kinds", nil, &out)
}

// Objects lists the lab's objects by kind ("" or "all" for every kind), namespace and
// name ("" for any).
func (c *Client) Objects(ctx context.Context, kind, namespace, name string) ([]ConfigObject, error) {
	q := url.Values{"kind": {kind}, "namespace": {namespace}, "name": {name}}
	var out []ConfigObject
	return out, c.do(ctx, http.MethodGet, "/v1/objects?"+q.Encode(), nil, &out)
}

// KubeObjects lists the lab's objects as kubectl reads them: kind (any spelling kubectl
// takes), namespace and name ("" for any) and a label selector (kubectl's -l, "" for
// all).
func (c *Client) KubeObjects(ctx context.Context, kind, namespace, name, selector string) ([]KubeObject, error) {
	q := url.Values{"kind": {kind}, "namespace": {namespace}, "name": {name}, "labelSelector": {selector}}
	var out []KubeObject
	return out, c.do(ctx, http.MethodGet, "/v1/kube?"+q.Encode(), nil, &out)
}

// DescribeService describes the Service name of namespace ("" for the one of any
// namespace that has that name): its ports with the mTLS mode the proxies enforce, its
// pods, one client proxy's view of its endpoints, and the Istio objects that apply.
// ErrUnknownService (ErrNotFound) for a name the lab does not have.
func (c *Client) DescribeService(ctx context.Context, namespace, name string) (ServiceView, error) {
	var out ServiceView
	q := url.Values{"namespace": {namespace}}
	return out, c.do(ctx, http.MethodGet, "/v1/services/"+url.PathEscape(name)+"?"+q.Encode(), nil, &out)
}

// ProxyStatus returns every proxy's xDS state.
func (c *Client) ProxyStatus(ctx context.Context) ([]ProxyStatus, error) {
	var out []ProxyStatus
	return out, c.do(ctx, http.MethodGet, "/v1/proxy-status", nil, &out)
}

// ProxySecrets returns every sidecar's secrets, read from the proxies.
func (c *Client) ProxySecrets(ctx context.Context) ([]PodSecrets, error) {
	var out []PodSecrets
	return out, c.do(ctx, http.MethodGet, "/v1/proxy-secrets", nil, &out)
}

// PodHistory returns the config versions the control plane keeps of pod's proxy.
func (c *Client) PodHistory(ctx context.Context, pod string) (PodHistory, error) {
	var out PodHistory
	return out, c.do(ctx, http.MethodGet, "/v1/pods/"+url.PathEscape(pod)+"/history", nil, &out)
}

// PodDiff returns the semantic difference between two config versions of pod's proxy.
func (c *Client) PodDiff(ctx context.Context, pod, from, to string) (ConfigDiff, error) {
	var out ConfigDiff
	q := url.Values{"from": {from}, "to": {to}}
	return out, c.do(ctx, http.MethodGet, "/v1/pods/"+url.PathEscape(pod)+"/diff?"+q.Encode(), nil, &out)
}

// Trace explains the path of one request from a pod.
func (c *Client) Trace(ctx context.Context, r TraceRequest) (TraceResult, error) {
	var out TraceResult
	return out, c.do(ctx, http.MethodPost, "/v1/trace", r, &out)
}

// AddFault adds a fault to the lab's machinery.
func (c *Client) AddFault(ctx context.Context, spec FaultSpec) (Fault, error) {
	var out Fault
	return out, c.do(ctx, http.MethodPost, "/v1/faults", spec, &out)
}

// Faults lists the lab's active faults.
func (c *Client) Faults(ctx context.Context) ([]Fault, error) {
	var out []Fault
	return out, c.do(ctx, http.MethodGet, "/v1/faults", nil, &out)
}

// ClearFaults clears the fault id, or every fault when id is "", and returns those cleared.
func (c *Client) ClearFaults(ctx context.Context, id string) ([]Fault, error) {
	var out []Fault
	path := "/v1/faults"
	if id != "" {
		path += "/" + url.PathEscape(id)
	}
	return out, c.do(ctx, http.MethodDelete, path, nil, &out)
}

// CAStatus returns the lab CA's status.
func (c *Client) CAStatus(ctx context.Context) (CAStatus, error) {
	var out CAStatus
	return out, c.do(ctx, http.MethodGet, "/v1/ca", nil, &out)
}

// RotateRoot rotates the lab's root (to certPEM/keyPEM when given) and returns the new status.
func (c *Client) RotateRoot(ctx context.Context, certPEM, keyPEM []byte) (CAStatus, error) {
	var out CAStatus
	r := CARotateRequest{CertPEM: string(certPEM), KeyPEM: string(keyPEM)}
	return out, c.do(ctx, http.MethodPost, "/v1/ca/rotate-root", r, &out)
}

// SetCAClock shifts the CA's clock by offset (0 resets) and returns the new status.
func (c *Client) SetCAClock(ctx context.Context, offset time.Duration, renew bool) (CAStatus, error) {
	var out CAStatus
	return out, c.do(ctx, http.MethodPost, "/v1/ca/clock", CAClockRequest{Offset: offset.String(), Renew: renew}, &out)
}

// PauseCertRenewal pauses (or resumes) a pod agent's certificate renewal.
func (c *Client) PauseCertRenewal(ctx context.Context, pod string, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var out map[string]any
	return c.do(ctx, http.MethodPost, "/v1/pods/"+url.PathEscape(pod)+"/certs/"+verb, struct{}{}, &out)
}

// Guide reads where the lab's guide is.
func (c *Client) Guide(ctx context.Context) (GuideState, error) {
	var s GuideState
	return s, c.do(ctx, http.MethodGet, "/v1/guide", nil, &s)
}

// GuideCheck checks the current step.
func (c *Client) GuideCheck(ctx context.Context) (GuideCheck, error) {
	var r GuideCheck
	return r, c.do(ctx, http.MethodPost, "/v1/guide/check", struct{}{}, &r)
}

// GuideNext moves to the next step and runs its actions.
func (c *Client) GuideNext(ctx context.Context) (GuideState, error) {
	var s GuideState
	return s, c.do(ctx, http.MethodPost, "/v1/guide/next", struct{}{}, &s)
}

// GuideSolve applies the current step's solution and checks it.
func (c *Client) GuideSolve(ctx context.Context) (GuideCheck, error) {
	var r GuideCheck
	return r, c.do(ctx, http.MethodPost, "/v1/guide/solve", struct{}{}, &r)
}

// MaxAnswerBytes bounds what a Client reads of one answer: far above the largest the
// lab gives (every object of a lab is at most 32 MiB as JSON), so that no answer, from
// a lab or from whatever listens on the socket, can take the caller's memory (the
// agent's name-table poller is a client too).
const MaxAnswerBytes = 64 << 20

// maxErrorBody bounds what an *Error keeps of an answer that is not the API's JSON error.
const maxErrorBody = 1024

// do sends in (when not nil) as JSON with method to path and decodes a 200 answer into
// out. Any other answer is an *Error carrying the server's message; no answer is an
// *Error of Status 0.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request %s: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lab"+path, body)
	if err != nil {
		return fmt.Errorf("call lab API %s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &Error{Method: method, Path: path, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return &Error{Method: method, Path: path, Err: err}
	}
	if len(data) > MaxAnswerBytes {
		return fmt.Errorf("read lab API %s: the answer is larger than the limit of %d bytes", path, MaxAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Method: method, Path: path, Status: resp.StatusCode}
		var answer struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &answer) == nil && answer.Error != "" {
			e.Message = answer.Error
		} else {
			e.Body = string(bytes.TrimSpace(data[:min(len(data), maxErrorBody)]))
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode lab API %s: %w", path, err)
	}
	return nil
}
