package api

import (
	"net/netip"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// LabInfo is what GET /v1/lab answers.
type LabInfo struct {
	Name        string       `json:"name"`
	PID         int          `json:"pid"`
	Scenario    string       `json:"scenario"`
	PodCIDR     netip.Prefix `json:"podCIDR"`
	ServiceCIDR netip.Prefix `json:"serviceCIDR"`
	XDSAddr     string       `json:"xdsAddr,omitempty"`
	Created     time.Time    `json:"created"`
	// ControlPlane is what generates the proxies' config: "meshlab" or "istiod" (up
	// --control-plane); with istiod, its Istio version, once it exited why, and while it
	// refuses the lab's last objects why.
	ControlPlane        string `json:"controlPlane,omitempty"`
	ControlPlaneVersion string `json:"controlPlaneVersion,omitempty"`
	ControlPlaneError   string `json:"controlPlaneError,omitempty"`
	ControlPlaneRefused string `json:"controlPlaneRefused,omitempty"`
}

// PodStatus is one pod as GET /v1/pods reports it.
type PodStatus struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Key names the pod in every other call of the API (and its network namespace and
	// run directory): "<name>" in namespace default, "<name>.<namespace>" elsewhere, as
	// istioctl names a pod; names may repeat across namespaces, keys do not.
	Key       string     `json:"key"`
	NetNS     string     `json:"netns"`
	IP        netip.Addr `json:"ip"`
	Sidecar   bool       `json:"sidecar"`
	Ready     bool       `json:"ready"`
	Epoch     int        `json:"epoch"`     // the live proxy epoch, -1 when none
	DataPlane string     `json:"dataPlane"` // "envoy" or "meshlab-proxy"
	Restarts  int        `json:"restarts"`
	Message   string     `json:"message,omitempty"`
	// RequestsOut counts requests this pod's sidecar sent to outbound clusters, RequestsIn
	// those it delivered to its own app (upstream_rq_total of outbound|... and inbound|...).
	RequestsOut uint64 `json:"requestsOut"`
	RequestsIn  uint64 `json:"requestsIn"`
}

// NameTable is the DNS name table an agent serves, as the agent reads it: the agent's
// own wire type (the agent long-polls it from the lab API), so the two cannot drift.
type NameTable = agentapi.NameTable

// ErrUnknownPod is returned for a pod the lab does not have.
var ErrUnknownPod = sentinel("unknown pod", ErrNotFound)
