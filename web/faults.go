package web

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

	"github.com/gin-gonic/gin"
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

// FaultBackend adds, lists and clears faults. AddFault returns ErrBadFault,
// ErrUnknownPod or ErrFaultExists (wrapped, with a message naming the valid choices);
// ClearFaults clears the fault id, or every fault when id is "", returning those
// cleared (ErrUnknownFault for an id not active). Safe for concurrent use.
type FaultBackend interface {
	AddFault(ctx context.Context, spec FaultSpec) (Fault, error)
	Faults() []Fault
	ClearFaults(ctx context.Context, id string) ([]Fault, error)
}

// FaultRoutes returns GET /v1/faults, POST /v1/faults (a FaultSpec), DELETE /v1/faults
// (every fault) and DELETE /v1/faults/:id.
func FaultRoutes(b FaultBackend) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/faults", func(c *gin.Context) { c.JSON(http.StatusOK, b.Faults()) })
		v1.POST("/faults", func(c *gin.Context) {
			var spec FaultSpec
			if err := c.ShouldBindJSON(&spec); err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": "decode fault: " + err.Error()})
				return
			}
			f, err := b.AddFault(c.Request.Context(), spec)
			if err != nil {
				writeFaultError(c, err)
				return
			}
			c.JSON(http.StatusOK, f)
		})
		clear := func(c *gin.Context) {
			fs, err := b.ClearFaults(c.Request.Context(), c.Param("id"))
			if err != nil {
				writeFaultError(c, err)
				return
			}
			c.JSON(http.StatusOK, fs)
		}
		v1.DELETE("/faults", clear)
		v1.DELETE("/faults/:id", clear)
	}
}

func writeFaultError(c *gin.Context, err error) {
	switch {
	case errors.Is(err, ErrBadFault):
		c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
	case errors.Is(err, ErrFaultExists):
		c.JSON(http.StatusConflict, gin.H{"error": err.Error()})
	case errors.Is(err, ErrUnknownFault):
		c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
	default:
		writeError(c, err)
	}
}

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
