package agent

import (
	"net/netip"
	"time"
)

// Data planes reported in Status.DataPlane.
const (
	DataPlaneEnvoy        = "envoy"
	DataPlaneMeshlabProxy = "meshlab-proxy"
)

// Epoch states reported in EpochStatus.State.
const (
	EpochStarting = "starting" // process started, admin says PRE_INITIALIZING/INITIALIZING or is not up yet
	EpochLive     = "live"     // admin server_info state LIVE
	EpochDraining = "draining" // admin server_info state DRAINING
	EpochExited   = "exited"   // the process has exited
)

// Status is the agent's state, served as JSON at GET /status on agent.sock.
type Status struct {
	Pod          string        `json:"pod"`
	Ready        bool          `json:"ready"`
	ProxyPath    string        `json:"proxyPath"`
	ProxyVersion string        `json:"proxyVersion"`
	DataPlane    string        `json:"dataPlane"` // DataPlaneEnvoy or DataPlaneMeshlabProxy
	Epochs       []EpochStatus `json:"epochs"`    // running epochs and the most recent exited ones, oldest first
	Restarts     int           `json:"restarts"`  // proxy processes started again after an unexpected exit
	Message      string        `json:"message"`   // why not ready, or the last stderr lines of a crashed proxy
}

// EpochStatus is one proxy process.
type EpochStatus struct {
	Epoch     int        `json:"epoch"`
	PID       int        `json:"pid"`
	State     string     `json:"state"` // EpochStarting, EpochLive, EpochDraining or EpochExited
	StartedAt time.Time  `json:"startedAt"`
	ExitedAt  *time.Time `json:"exitedAt,omitempty"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// NameTable is the DNS name table the lab API serves to one pod's agent: lowercase names
// without a trailing dot, each mapped to the service VIPs behind it.
type NameTable struct {
	Version uint64                  `json:"version"`
	Names   map[string][]netip.Addr `json:"names"`
}
