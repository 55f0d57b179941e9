package api

import (
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
	ErrBadFault     = sentinel("invalid fault", ErrInvalid)
	ErrFaultExists  = sentinel("fault already active", ErrConflict)
	ErrUnknownFault = sentinel("unknown fault", ErrNotFound)
)
