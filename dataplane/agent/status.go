package agent

import (
	"context"
	"net/netip"
	"strings"
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

// Why an epoch was started, reported in EpochStatus.Reason.
const (
	ReasonInitial = "initial" // the agent started
	ReasonRestart = "restart" // POST /restart (meshlab proxy restart)
	ReasonConfig  = "config"  // PUT /proxy-config changed the proxy settings
	ReasonCrash   = "crash"   // the previous newest epoch exited unexpectedly
	ReasonRetry   = "retry"   // a restart attempt failed and is tried again
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
	// Failed reports that the proxy failed more often in a row than the restart budget
	// allows (or cannot be started at all); the agent stopped restarting it. POST
	// /restart tries again.
	Failed bool `json:"failed"`
	// ConsecutiveFailures counts unexpected exits of the newest epoch since one last ran
	// long enough; NextRestartAt is when the next restart is due while backing off.
	ConsecutiveFailures int           `json:"consecutiveFailures"`
	NextRestartAt       *time.Time    `json:"nextRestartAt,omitempty"`
	Settings            ProxySettings `json:"settings"` // the proxy settings new epochs start with
	// Cert is the workload certificate served over SDS; nil when the agent has no CA token.
	Cert *CertStatus `json:"cert,omitempty"`
	// Proxyless is set for a proxyless gRPC pod (grpc-agent): no proxy, epochs or
	// settings; its bootstrap, certificate files and the XDS proxy relaying its app's
	// streams (proxyless.go).
	Proxyless *ProxylessStatus `json:"proxyless,omitempty"`
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
	Reason    string     `json:"reason,omitempty"` // ReasonInitial, ReasonRestart, ...
	// The binary this epoch runs, its --version and the data plane it is.
	ProxyPath    string `json:"proxyPath,omitempty"`
	ProxyVersion string `json:"proxyVersion,omitempty"`
	DataPlane    string `json:"dataPlane,omitempty"`
}

// NameTable is the DNS name table the lab API serves to one pod's agent: lowercase names
// without a trailing dot, each mapped to the service VIPs behind it.
type NameTable struct {
	Version uint64                  `json:"version"`
	Names   map[string][]netip.Addr `json:"names"`
}

// buildStatus assembles the agent's Status from the epoch manager and the readiness check.
func buildStatus(ctx context.Context, pod string, mgr *epochManager, ready readiness) Status {
	snap := mgr.snapshot()
	var msg []string
	rerr := ready.check(ctx)
	if rerr != nil {
		msg = append(msg, "not ready: "+rerr.Error())
	}
	if snap.lastExit != "" {
		msg = append(msg, "last unexpected proxy exit: "+snap.lastExit)
	}
	st := Status{
		Pod: pod, Ready: rerr == nil, Epochs: snap.epochs, Restarts: snap.restarts,
		Message: strings.Join(msg, "\n"), Failed: snap.failed, ConsecutiveFailures: snap.failures,
		NextRestartAt: snap.nextRestart, Settings: snap.settings,
	}
	// The binary of the newest epoch that got as far as starting.
	for i := len(snap.epochs) - 1; i >= 0; i-- {
		if e := snap.epochs[i]; e.ProxyPath != "" {
			st.ProxyPath, st.ProxyVersion, st.DataPlane = e.ProxyPath, e.ProxyVersion, e.DataPlane
			break
		}
	}
	return st
}
