package api

import (
	"time"
)

// ProxyEpoch is one proxy process of a pod, as its agent reports it.
type ProxyEpoch struct {
	Epoch        int        `json:"epoch"`
	PID          int        `json:"pid"`
	State        string     `json:"state"` // starting, live, draining or exited
	StartedAt    time.Time  `json:"startedAt"`
	ExitedAt     *time.Time `json:"exitedAt,omitempty"`
	ExitCode     *int       `json:"exitCode,omitempty"`
	Error        string     `json:"error,omitempty"`
	Reason       string     `json:"reason,omitempty"` // initial, restart, config, crash or retry
	ProxyPath    string     `json:"proxyPath,omitempty"`
	ProxyVersion string     `json:"proxyVersion,omitempty"`
	DataPlane    string     `json:"dataPlane,omitempty"`
}

// ProxySettings are a pod's proxy settings that live in the bootstrap or command line;
// durations are Go duration strings ("45s").
type ProxySettings struct {
	LogLevel               string `json:"logLevel"`
	Concurrency            int    `json:"concurrency"`
	DrainDuration          string `json:"drainDuration"`
	ParentShutdownDuration string `json:"parentShutdownDuration"`
	ProxyPath              string `json:"proxyPath"`
}

// AgentStatus is a pod agent's full state: its epochs, restarts and failure.
type AgentStatus struct {
	Ready               bool          `json:"ready"`
	ProxyPath           string        `json:"proxyPath"`
	ProxyVersion        string        `json:"proxyVersion"`
	DataPlane           string        `json:"dataPlane"`
	Epochs              []ProxyEpoch  `json:"epochs"`
	Restarts            int           `json:"restarts"`
	Message             string        `json:"message,omitempty"`
	Failed              bool          `json:"failed"`
	ConsecutiveFailures int           `json:"consecutiveFailures"`
	NextRestartAt       *time.Time    `json:"nextRestartAt,omitempty"`
	Settings            ProxySettings `json:"settings"`
	Cert                *WorkloadCert `json:"cert,omitempty"` // nil when the agent has no certificate manager
	// Proxyless is set for a proxyless gRPC pod (grpc-agent template): no proxy runs.
	Proxyless *ProxylessAgent `json:"proxyless,omitempty"`
}

// ProxylessAgent is a proxyless gRPC pod's agent: the files its app reads and the XDS
// proxy that relays the app's xDS streams to the lab.
type ProxylessAgent struct {
	Bootstrap   string    `json:"bootstrap"` // GRPC_XDS_BOOTSTRAP
	XDSSocket   string    `json:"xdsSocket"`
	CertDir     string    `json:"certDir"`
	Streams     []string  `json:"streams"` // node ids of the open relayed streams
	Relayed     int       `json:"relayed"` // streams relayed since the agent started
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// WorkloadCert is the pod's workload certificate as its agent serves it over SDS.
type WorkloadCert struct {
	SPIFFEID  string     `json:"spiffeID"`
	Serial    string     `json:"serial,omitempty"`
	NotBefore time.Time  `json:"notBefore,omitzero"`
	NotAfter  time.Time  `json:"notAfter,omitzero"`
	RotateAt  time.Time  `json:"rotateAt,omitzero"`
	Rotations int        `json:"rotations"`
	Error     string     `json:"error,omitempty"` // the last failed attempt to get one
	Trust     *CertTrust `json:"trust,omitempty"` // issuer, chain and trust bundle (ca.go)
}

// PodDetail is what GET /v1/pods/:pod answers: the pod's summary and, for a pod with a
// sidecar whose agent answered, its agent's full status.
type PodDetail struct {
	PodStatus
	Labels         map[string]string `json:"labels,omitempty"`
	ServiceAccount string            `json:"serviceAccount,omitempty"`
	Proxy          *AgentStatus      `json:"proxy,omitempty"`
	// DataplaneMode is how the pod's traffic joins the mesh: "sidecar", "ambient" or "none".
	DataplaneMode string `json:"dataplaneMode,omitempty"`
	// Ambient is an ambient pod's enrollment by the node agent; nil for other pods.
	Ambient *AmbientStatus `json:"ambient,omitempty"`
	// Ztunnel is set for the lab's ztunnel pod (istio-system/ztunnel-<x>) only.
	Ztunnel *ZtunnelPodStatus `json:"ztunnel,omitempty"`
}

// ZtunnelPodStatus is the lab's ztunnel as `describe pod` shows it.
type ZtunnelPodStatus struct {
	// Connected reports whether ztunnel is connected to the node agent over ZDS.
	Connected bool `json:"connected"`
	// Pods counts the ambient pods ztunnel has (acknowledged over ZDS).
	Pods int `json:"pods"`
	// Restarts counts the times the lab restarted ztunnel after it exited.
	Restarts int `json:"restarts"`
	// Log is ztunnel's log file.
	Log string `json:"log"`
}

// AmbientStatus is an ambient pod's enrollment, as istio-cni's node agent holds it.
type AmbientStatus struct {
	// Redirection is the pod's ambient.istio.io/redirection: "enabled" once ztunnel has
	// it, "pending" while its rules are in and ztunnel has not acknowledged it, "" when
	// not enrolled.
	Redirection string `json:"redirection"`
	// Rules are istio-cni's in-pod rules in the pod's namespace with their packet and
	// byte counters, as iptables-save -c prints them (mangle, nat and raw).
	Rules string `json:"rules,omitempty"`
	// Routing is the pod's policy routing (ip rule and table 100).
	Routing string `json:"routing,omitempty"`
	// Error says why the rules or routing could not be read.
	Error string `json:"error,omitempty"`
}

// ProxyRestart is what POST /v1/pods/:pod/proxy/restart answers.
type ProxyRestart struct {
	Pod   string `json:"pod"`
	Epoch int    `json:"epoch"` // the new epoch; -1 when none was started
	// Live reports whether the new epoch reported LIVE before the answer.
	Live bool `json:"live"`
	// Elapsed is the time from the request to the new epoch LIVE (or to giving up).
	Elapsed time.Duration `json:"elapsed"`
	Message string        `json:"message,omitempty"`
}

// ErrNoSidecar is returned for proxy operations on a pod without a sidecar.
var ErrNoSidecar = sentinel("pod has no sidecar", ErrConflict)
