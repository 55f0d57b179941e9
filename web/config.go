package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
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

// ConfigStore applies, deletes and lists the lab's objects. Apply and Delete are atomic
// and serialised; every method is safe for concurrent use.
type ConfigStore interface {
	Apply(ctx context.Context, files []ConfigFile) ([]string, error)
	Delete(ctx context.Context, files []ConfigFile, refs []ObjectRef) ([]string, error)
	// Objects lists objects by kind ("" or "all" for every kind), namespace and name
	// ("" for any).
	Objects(kind, namespace, name string) ([]ConfigObject, error)
}

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

// ProxyStatusReader reports every proxy's xDS state. Safe for concurrent use; it does not
// block.
type ProxyStatusReader interface {
	ProxyStatus() []ProxyStatus
}

// ConfigRoutes serves POST /v1/apply, POST /v1/delete, GET /v1/objects?kind=&namespace=&name=
// and GET /v1/proxy-status.
func ConfigRoutes(s ConfigStore, ps ProxyStatusReader) Routes {
	answer := func(c *gin.Context, changes []string, err error) {
		var ce *ConfigError
		switch {
		case errors.As(err, &ce):
			c.JSON(http.StatusUnprocessableEntity, gin.H{"error": err.Error()})
		case err != nil:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		default:
			c.JSON(http.StatusOK, ChangeResult{Changes: changes})
		}
	}
	return func(v1 *gin.RouterGroup) {
		v1.POST("/apply", func(c *gin.Context) {
			var r ApplyRequest
			if !bindConfigRequest(c, &r) {
				return
			}
			if len(r.Files) == 0 {
				c.JSON(http.StatusBadRequest, gin.H{"error": "no files to apply"})
				return
			}
			changes, err := s.Apply(c.Request.Context(), r.Files)
			answer(c, changes, err)
		})
		v1.POST("/delete", func(c *gin.Context) {
			var r DeleteRequest
			if !bindConfigRequest(c, &r) {
				return
			}
			if len(r.Files) == 0 && len(r.Refs) == 0 {
				c.JSON(http.StatusBadRequest, gin.H{"error": "nothing to delete"})
				return
			}
			changes, err := s.Delete(c.Request.Context(), r.Files, r.Refs)
			answer(c, changes, err)
		})
		v1.GET("/objects", func(c *gin.Context) {
			objs, err := s.Objects(c.Query("kind"), c.Query("namespace"), c.Query("name"))
			var ce *ConfigError
			switch {
			case errors.As(err, &ce):
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, objs)
			}
		})
		v1.GET("/proxy-status", func(c *gin.Context) {
			c.JSON(http.StatusOK, ps.ProxyStatus())
		})
	}
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

// MaxConfigRequestBytes bounds the body of an apply or delete: the files it carries (at
// most controlplane/config's 16 MiB each, as JSON strings) and room for escaping.
const MaxConfigRequestBytes = 64 << 20

// bindConfigRequest decodes the JSON body into r, reading at most MaxConfigRequestBytes;
// it answers 413 or 400 itself and reports whether r is ready.
func bindConfigRequest(c *gin.Context, r any) bool {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxConfigRequestBytes)
	err := c.ShouldBindJSON(r)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		c.JSON(http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("decode request: the request is larger than the limit of %d bytes", tooLarge.Limit)})
		return false
	case err != nil:
		c.JSON(http.StatusBadRequest, gin.H{"error": "decode request: " + err.Error()})
		return false
	}
	return true
}
