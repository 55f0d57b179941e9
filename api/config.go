package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// ConfigFile is one file of objects sent to the lab.
type ConfigFile struct {
	Name string `json:"name"` // used in messages
	Data string `json:"data"`
	// Namespace is that of the objects that name none, as kubectl's -n ("" for default).
	Namespace string `json:"namespace,omitempty"`
	// LastApplied records each object as kubectl apply does, in its
	// kubectl.kubernetes.io/last-applied-configuration annotation (kubectl create
	// and the lab's own writes do not).
	LastApplied bool `json:"lastApplied,omitempty"`
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

// ChangeResult answers apply and delete: one change per object, then one per pod made or
// removed, in the order kubectl would print them.
type ChangeResult struct {
	Changes []Change `json:"changes"`
}

// Actions of a Change.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
	ActionDeleted    = "deleted"
	ActionFailed     = "FAILED" // a pod apply could not make, or that did not become ready
	// ActionSkipped is an object of a cluster's dump that the lab makes, derives or has no
	// use for (an EndpointSlice, a ReplicaSet its Deployment made...); Reason says which.
	ActionSkipped = "skipped"
)

// PodKind is the Kind of a Change to a pod (made or removed by an apply or delete of its
// workload), as `meshlab apply` prints it.
const PodKind = "pod"

// Change is one object an apply or delete changed, or one pod it made or removed.
type Change struct {
	Kind      string `json:"kind"` // the object's kind, or PodKind
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    string `json:"action"` // one of the Action constants
	// Error says why a pod FAILED, or what went wrong removing a deleted one.
	Error string `json:"error,omitempty"`
	// Reason says why an object was skipped.
	Reason string `json:"reason,omitempty"`
	// Unrecorded: apply replaced an object kubectl apply had not recorded (made by
	// create): kubectl's warning that the last-applied-configuration annotation is
	// missing precedes the line.
	Unrecorded bool `json:"unrecorded,omitempty"`
}

// String renders the change as kubectl does: "VirtualService default/reviews configured",
// "pod default/reviews-v2-0 created", "pod default/x FAILED: why".
func (c Change) String() string {
	s := c.Kind + " " + c.Namespace + "/" + c.Name + " " + c.Action
	switch {
	case c.Reason != "":
		s += ": " + c.Reason
	case c.Error == "":
	case c.Action == ActionFailed:
		s += ": " + c.Error
	default:
		s += " with errors: " + c.Error
	}
	return s
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

// ConflictError marks a write refused for optimistic concurrency, as the API server's
// 409 Conflict: an object sent with a metadata.resourceVersion that is not the stored
// object's. Nothing changed. The API answers 409 with its message, the API server's:
// `Operation cannot be fulfilled on deployments.apps "x": the object has been modified;
// please apply your changes to the latest version and try again`.
type ConflictError struct {
	Resource string // kubectl's plural with its group: deployments.apps, services
	Name     string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", e.Resource, e.Name)
}

// Is reports whether target is ErrInvalid, the class of every ConfigError.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalid }

// ProxyStatus is one proxy's xDS state, as `meshlab proxy-status` shows it.
type ProxyStatus struct {
	Pod       string                `json:"pod"`
	Namespace string                `json:"namespace"`
	NodeID    string                `json:"nodeID"`
	Connected bool                  `json:"connected"`
	Types     map[string]TypeStatus `json:"types"` // by CDS, LDS, EDS, RDS, SDS
	// PushError is why the control plane could not generate the proxy's config at its
	// last update ("" when it could): the proxy keeps the config it had (istiod's push
	// error for one proxy; the others get theirs).
	PushError string `json:"pushError,omitempty"`
}

// SyncResult is what GET /v1/synced answers once the proxies run the lab's config.
type SyncResult struct {
	Synced bool `json:"synced"`
}

// TypeStatus is the state of one xDS type on one proxy.
type TypeStatus struct {
	Want      string    `json:"want,omitempty"` // version of the proxy's current snapshot, to be sent
	Sent      string    `json:"sent"`           // version last sent
	Acked     string    `json:"acked"`          // version last applied
	Nonce     string    `json:"nonce"`
	NackError string    `json:"nackError,omitempty"` // the last rejection, kept as history
	LastNack  time.Time `json:"lastNack,omitzero"`
	LastAck   time.Time `json:"lastAck,omitzero"` // when the last ACK arrived
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
