package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// ConfigFile is one file of objects sent to the lab.
type ConfigFile struct {
	Name string `json:"name"` // used in messages
	Data string `json:"data"`
}

// ObjectRef names one object.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"` // "default" when empty
	Name      string `json:"name"`
}

// ApplyRequest is the body of POST /v1/apply: the files are applied as one change.
type ApplyRequest struct {
	Files []ConfigFile `json:"files"`
}

// DeleteRequest is the body of POST /v1/delete: the objects of Files and those Refs name
// are deleted as one change.
type DeleteRequest struct {
	Files []ConfigFile `json:"files,omitempty"`
	Refs  []ObjectRef  `json:"refs,omitempty"`
}

// ChangeResult answers apply and delete: one line per object, as kubectl prints them
// ("VirtualService default/reviews configured").
type ChangeResult struct {
	Changes []string `json:"changes"`
}

// ConfigObject is one object of the lab, as GET /v1/objects lists it.
type ConfigObject struct {
	Kind      string          `json:"kind"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	File      string          `json:"file"`   // the file it was applied from
	Object    json.RawMessage `json:"object"` // the object as written
}

// ConfigError marks an error in the objects sent (invalid, or not applicable to the
// running lab): the API answers 422 with its message.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// ProxyStatus is one proxy's xDS state, as `meshlab proxy-status` shows it.
type ProxyStatus struct {
	Pod       string                `json:"pod"`
	Namespace string                `json:"namespace"`
	NodeID    string                `json:"nodeID"`
	Connected bool                  `json:"connected"`
	Types     map[string]TypeStatus `json:"types"` // by CDS, LDS, EDS, RDS, SDS
}

// TypeStatus is the state of one xDS type on one proxy.
type TypeStatus struct {
	Want      string    `json:"want,omitempty"` // version of the proxy's current snapshot, to be sent
	Sent      string    `json:"sent"`           // version last sent
	Acked     string    `json:"acked"`          // version last applied
	Nonce     string    `json:"nonce"`
	NackError string    `json:"nackError,omitempty"` // the last rejection, kept as history
	LastNack  time.Time `json:"lastNack,omitzero"`
}

// State renders the type's state as istioctl proxy-status does: SYNCED when the proxy
// applied the last version sent, NACK when it rejected it (or one since its last ACK),
// STALE when it has not answered yet or the control plane has a newer version it has not
// sent yet, NOT SENT when nothing was sent.
func (t TypeStatus) State() string {
	switch {
	case t.Sent == "":
		return "NOT SENT"
	case t.Want != "" && t.Want != t.Sent:
		return "STALE"
	case t.Sent == t.Acked:
		return "SYNCED"
	case t.NackError != "":
		return "NACK"
	}
	return "STALE"
}

// Apply sends files to the lab as one change and returns what changed.
func (c *Client) Apply(ctx context.Context, files []ConfigFile) ([]string, error) {
	var out ChangeResult
	return out.Changes, c.postJSON(ctx, "/v1/apply", ApplyRequest{Files: files}, &out)
}

// Delete deletes objects from the lab as one change and returns what changed.
func (c *Client) Delete(ctx context.Context, r DeleteRequest) ([]string, error) {
	var out ChangeResult
	return out.Changes, c.postJSON(ctx, "/v1/delete", r, &out)
}

// Objects lists the lab's objects (see ConfigStore.Objects).
func (c *Client) Objects(ctx context.Context, kind, namespace, name string) ([]ConfigObject, error) {
	q := url.Values{"kind": {kind}, "namespace": {namespace}, "name": {name}}
	var out []ConfigObject
	return out, c.get(ctx, "/v1/objects?"+q.Encode(), &out)
}

// ProxyStatus returns every proxy's xDS state.
func (c *Client) ProxyStatus(ctx context.Context) ([]ProxyStatus, error) {
	var out []ProxyStatus
	return out, c.get(ctx, "/v1/proxy-status", &out)
}

// postJSON sends in as JSON and decodes the answer into out; an error answer's message is
// returned as the error, as the lab wrote it.
func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	return c.call(ctx, http.MethodPost, path, in, out)
}
