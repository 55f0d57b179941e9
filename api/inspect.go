package api

import (
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// PodInspection is everything the dashboard's pod page shows about one pod.
type PodInspection struct {
	Pod string `json:"pod"`
	// Agent is the agent's status (epochs, restarts); nil for a pod without a sidecar
	// or when the agent did not answer (AgentError says why).
	Agent      *agentapi.Status `json:"agent,omitempty"`
	AgentError string           `json:"agentError,omitempty"`
	// Capture is `iptables-save -c -t nat` in the pod's namespace: the capture rules with
	// their comments and packet/byte counters.
	Capture      string `json:"capture"`
	CaptureError string `json:"captureError,omitempty"`
	// XDS is the discovery server's view of the pod's proxy, one entry per type URL.
	XDSConnected bool           `json:"xdsConnected"`
	XDS          []XDSTypeState `json:"xds"`
	// Logs holds the last lines of the pod's proxy, app and agent logs, by name.
	Logs map[string][]string `json:"logs"`
}

// XDSTypeState is one resource type as the discovery server sent it to a proxy.
type XDSTypeState struct {
	TypeURL   string     `json:"typeUrl"`
	Sent      string     `json:"sent"`  // version last sent
	Acked     string     `json:"acked"` // version the proxy last applied
	Nonce     string     `json:"nonce"`
	Synced    bool       `json:"synced"`              // Sent == Acked
	NackError string     `json:"nackError,omitempty"` // the last NACK's error, kept as history
	LastNack  *time.Time `json:"lastNack,omitempty"`
}
