package agentapi

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// Data planes reported in Status.DataPlane.
const (
	DataPlaneEnvoy        = "envoy"
	DataPlaneMeshlabProxy = "meshlab-proxy"
	// DataPlaneProxyless is Status.DataPlane of a proxyless pod: no proxy process.
	DataPlaneProxyless = "proxyless-grpc"
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

// Status is the agent's state, served as JSON at GET /status.
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
	// streams.
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

// RestartResult is what a restart request (POST /restart, PUT /proxy-config) did.
type RestartResult struct {
	// Epoch is the epoch started for this request; -1 when nothing was started.
	Epoch int `json:"epoch"`
	// Restarted reports whether a new epoch was started (false: settings unchanged).
	Restarted bool `json:"restarted"`
}

// ProxySettings are the pod's proxy settings that live in the proxy's command line or
// bootstrap, so that changing one takes a new epoch. They are what PUT /proxy-config
// takes and GET /proxy-config answers. The agent validates them (a refusal is
// ErrBadRequest); zero values mean the agent's defaults.
type ProxySettings struct {
	LogLevel               string   `json:"logLevel"`               // proxy --log-level
	Concurrency            int      `json:"concurrency"`            // proxy --concurrency
	DrainDuration          Duration `json:"drainDuration"`          // proxy --drain-time-s
	ParentShutdownDuration Duration `json:"parentShutdownDuration"` // proxy --parent-shutdown-time-s
	// ProxyPath is the Envoy binary; "" lets the agent discover one.
	ProxyPath string `json:"proxyPath"`
	// DataPlane chooses the data plane: DataPlaneChoiceEnvoy, DataPlaneChoiceMeshlab, or
	// "" for the agent's discovery.
	DataPlane string `json:"dataPlane,omitempty"`
	// BootstrapOverride is a JSON fragment of envoy.config.bootstrap.v3.Bootstrap merged
	// into the generated bootstrap with proto.Merge, as Istio's custom bootstrap.
	BootstrapOverride string `json:"bootstrapOverride,omitempty"`
}

// Data plane choices of ProxySettings.DataPlane.
const (
	DataPlaneChoiceEnvoy   = "envoy"   // an Envoy binary is required
	DataPlaneChoiceMeshlab = "meshlab" // always the built-in `meshlab proxy`
)

// Duration is a time.Duration that reads and writes JSON as a Go duration string ("45s").
type Duration time.Duration

// MarshalJSON writes d as "45s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string, or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if nerr := json.Unmarshal(b, &n); nerr != nil {
			return fmt.Errorf("parse duration %s: want a string like \"45s\"", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parse duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// CertStatus is the workload certificate (GET /certs, Status.Cert), as `meshlab
// describe pod` shows it.
type CertStatus struct {
	SPIFFEID  string    `json:"spiffeID"`
	Serial    string    `json:"serial,omitempty"`
	NotBefore time.Time `json:"notBefore,omitzero"`
	NotAfter  time.Time `json:"notAfter,omitzero"`
	RotateAt  time.Time `json:"rotateAt,omitzero"`
	Rotations int       `json:"rotations"`       // certificates issued after the first
	Error     string    `json:"error,omitempty"` // the last failed attempt, until one succeeds
	ErrorAt   time.Time `json:"errorAt,omitzero"`
	// IssuerKeyID is the leaf's authority key id (hex): the key of the root (or its
	// cross-signed certificate) that signed it.
	IssuerKeyID string `json:"issuerKeyID,omitempty"`
	Issuer      string `json:"issuer,omitempty"` // the issuer's common name
	// Intermediates are sent after the leaf in the "default" secret (during a root
	// rotation: the new root cross-signed by the old one).
	Intermediates []CertRef `json:"intermediates,omitempty"`
	// TrustBundle is the ROOTCA secret: the roots peers' certificates are verified against.
	TrustBundle []CertRef `json:"trustBundle,omitempty"`
	Paused      bool      `json:"paused"` // renewal paused (POST /certs/pause)
}

// CertRef names one CA certificate.
type CertRef struct {
	Serial   string    `json:"serial"`
	Subject  string    `json:"subject"`
	KeyID    string    `json:"keyID,omitempty"` // subject key id, hex
	NotAfter time.Time `json:"notAfter"`
}

// ProxylessStatus is what a proxyless agent reports in Status.Proxyless.
type ProxylessStatus struct {
	Bootstrap string         `json:"bootstrap"` // the file GRPC_XDS_BOOTSTRAP names
	XDSSocket string         `json:"xdsSocket"` // the XDS proxy's socket the bootstrap names
	CertDir   string         `json:"certDir"`   // the file_watcher provider's files
	Relay     XDSRelayStatus `json:"relay"`
}

// XDSRelayStatus is the agent's XDS proxy as Status.Proxyless shows it.
type XDSRelayStatus struct {
	Upstream string           `json:"upstream"` // the lab's discovery socket
	Streams  []XDSRelayStream `json:"streams"`  // open streams
	Total    int              `json:"total"`    // streams relayed since the agent started
	// LastError is the last relayed stream that ended with an error, and when.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// XDSRelayStream is one relayed stream: the node it speaks for and what crossed it.
type XDSRelayStream struct {
	Node      string    `json:"node"`
	Delta     bool      `json:"delta"`
	Since     time.Time `json:"since"`
	Requests  int       `json:"requests"`
	Responses int       `json:"responses"`
}

// NameTable is the DNS name table the lab API serves to one pod's agent (GET
// /v1/agents/<pod>/nametable?version=<v> on the lab's api.sock, long-polled):
// lowercase names without a trailing dot, each mapped to the service VIPs behind it.
type NameTable struct {
	Version uint64                  `json:"version"`
	Names   map[string][]netip.Addr `json:"names"`
}
