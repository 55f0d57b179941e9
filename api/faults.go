package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Fault kinds: faults in the mesh's own machinery (`meshlab fault add KIND`).
const (
	FaultDelayPush     = "delay-push"     // pushes to Pods wait Delay
	FaultHoldPush      = "hold-push"      // pushes to Pods are held until cleared (STALE)
	FaultNack          = "nack"           // Pods[0] is sent a config it rejects (NACK)
	FaultDiscoveryStop = "discovery-stop" // the discovery server serves nothing for Duration
	FaultKillProxy     = "kill-proxy"     // SIGKILL the live proxy epoch of Pods[0]
	FaultKillAgent     = "kill-agent"     // SIGKILL the agent of Pods[0]
	FaultCAClock       = "ca-clock"       // the CA issues certificates valid from now+Offset
)

// FaultKinds lists every fault kind, in the order help shows them.
var FaultKinds = []string{FaultDelayPush, FaultHoldPush, FaultNack, FaultDiscoveryStop, FaultKillProxy, FaultKillAgent, FaultCAClock}

// FaultSpec is what POST /v1/faults takes.
type FaultSpec struct {
	Kind string   `json:"kind"`
	Pods []string `json:"pods,omitempty"`
	// Delay is the push delay of delay-push.
	Delay time.Duration `json:"delay,omitempty"`
	// Duration is how long discovery-stop lasts.
	Duration time.Duration `json:"duration,omitempty"`
	// Offset shifts the CA's clock for ca-clock (-25h issues expired 24h certificates).
	Offset time.Duration `json:"offset,omitempty"`
}

// Fault is one fault added to a lab. One-shot faults (kill-proxy, kill-agent) and faults
// that ended by themselves (discovery-stop) are not listed once done.
type Fault struct {
	ID string `json:"id"`
	FaultSpec
	Started time.Time `json:"started"`
	// Until is when a fault that clears itself ends.
	Until *time.Time `json:"until,omitempty"`
	// Message says what the fault did (the pid killed, ...).
	Message string `json:"message,omitempty"`
}

// Fault errors, answered as 400, 409 and 404.
var (
	ErrBadFault     = errors.New("invalid fault")
	ErrFaultExists  = errors.New("fault already active")
	ErrUnknownFault = errors.New("unknown fault")
)

// AddFault adds a fault to the lab.
func (c *Client) AddFault(ctx context.Context, spec FaultSpec) (Fault, error) {
	var out Fault
	return out, c.call(ctx, http.MethodPost, "/v1/faults", spec, &out)
}

// Faults lists the lab's active faults.
func (c *Client) Faults(ctx context.Context) ([]Fault, error) {
	var out []Fault
	return out, c.get(ctx, "/v1/faults", &out)
}

// ClearFaults clears the fault id, or every fault when id is "", and returns those cleared.
func (c *Client) ClearFaults(ctx context.Context, id string) ([]Fault, error) {
	var out []Fault
	path := "/v1/faults"
	if id != "" {
		path += "/" + url.PathEscape(id)
	}
	return out, c.call(ctx, http.MethodDelete, path, nil, &out)
}

// call sends in (when not nil) as JSON with method to path and decodes the answer into
// out; an error answer's message becomes the error.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
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
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("call lab API %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("call lab API %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("call lab API %s: %s: %s", path, resp.Status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode lab API %s: %w", path, err)
	}
	return nil
}
