package runner

import (
	"encoding/json"
	"time"

	"github.com/meshlab/meshlab/api"
)

// APIVersion and Kind identify a lab document.
const (
	APIVersion = "meshlab.dev/v1alpha1"
	Kind       = "Lab"
)

// Lab is a parsed and validated lab file.
type Lab struct {
	File         string // the file name, for messages
	Name         string // metadata.name
	Title        string
	Introduction string
	// ScenarioFile and ScenarioData are what the lab brings up: the bundled scenario
	// spec.scenario names, followed by the other documents of the lab file.
	ScenarioFile string
	ScenarioData []byte
	Steps        []Step
	// versions maps a pod name to its "version" label, for distribution checks;
	// hosts maps it to the hostnames of the services that select it, for mtls checks.
	versions map[string]string
	hosts    map[string][]string
	// workloads maps a pod name to its workload's name (its own for a bare pod), as
	// ztunnel's metrics name it, for hbone checks.
	workloads map[string]string
}

// Step is one step of a lab: Actions set the stage when the step begins (never the
// step's answer), Solution is the attendee's task (shown as the commands to run, applied
// by `lab solve` and `lab run`), Verify sends fresh traffic before every check, and
// Checks judge the result.
type Step struct {
	Name         string
	Instructions string
	Actions      []Action
	Solution     []Action
	Verify       []Action // traffic and wait only
	Checks       []Check
}

// Action is one thing a step does; exactly one field is set.
type Action struct {
	Kind string `json:"-"` // the YAML key: apply, delete, traffic, ...

	Apply        *ApplyAction   `json:"apply,omitempty"`
	Delete       *DeleteAction  `json:"delete,omitempty"`
	Traffic      *TrafficAction `json:"traffic,omitempty"`
	RestartProxy *PodRef        `json:"restart-proxy,omitempty"`
	KillProxy    *PodRef        `json:"kill-proxy,omitempty"`
	Wait         *WaitAction    `json:"wait,omitempty"`
	Load         *TrafficAction `json:"load,omitempty"`
	// ControlPlaneStop stops the discovery server for a while (proxies keep their last
	// config); RotateCerts rotates the lab CA's root, Istio-style.
	ControlPlaneStop *StopAction `json:"control-plane-stop,omitempty"`
	RotateCerts      *struct{}   `json:"rotate-certs,omitempty"`
	// ClearFaults clears every fault in force (meshlab fault clear).
	ClearFaults *struct{} `json:"clear-faults,omitempty"`
	// Label sets labels on a namespace, as `meshlab label namespace` (kubectl label)
	// does: istio.io/dataplane-mode=ambient enrolls its pods.
	Label *LabelAction `json:"label,omitempty"`
}

// LabelAction sets Labels on Namespace (`meshlab label namespace NAME K=V...`). The lab
// may not declare the namespace: the action applies it with these labels alone.
type LabelAction struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

// StopAction stops the control plane for Duration (at most 10 minutes).
type StopAction struct {
	Duration Duration `json:"duration"`
}

// ApplyAction applies objects given inline or read from a file (relative to the lab file).
type ApplyAction struct {
	Objects []json.RawMessage `json:"objects,omitempty"`
	File    string            `json:"file,omitempty"`
	// NoWait returns as soon as the lab took the objects, without waiting for every
	// proxy to apply them (to watch them arrive, or not, in the checks).
	NoWait bool `json:"noWait,omitempty"`
	data   []byte
}

// DeleteAction deletes objects by reference.
type DeleteAction struct {
	Objects []ObjectRef `json:"objects"`
}

// ObjectRef names one object to delete.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// TrafficAction sends N requests (GET unless Method says otherwise) with Headers from a
// pod (traffic), or keeps sending them in the background until the step's checks (load).
type TrafficAction struct {
	From    string            `json:"from"`
	URL     string            `json:"url"`
	N       int               `json:"count,omitempty"` // default 20 (traffic) or 5 per round (load); "n" would be YAML 1.1 false
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	shown   string            // From as the lab wrote it (validate resolves From to a pod's name)
}

// request is the traffic tool's request for t, n requests.
func (t TrafficAction) request(n int) api.TrafficRequest {
	return api.TrafficRequest{Pod: t.From, URL: t.URL, N: n, Method: t.Method, Headers: t.Headers}
}

// PodRef names a pod.
type PodRef struct {
	Pod   string `json:"pod"`
	shown string // Pod as the lab wrote it (validate resolves Pod to a pod's name)
}

// WaitAction waits for a duration, or until a check passes (within Timeout, default 20s).
type WaitAction struct {
	Duration Duration `json:"duration,omitempty"`
	Until    *Check   `json:"until,omitempty"`
	Timeout  Duration `json:"timeout,omitempty"`
}

// Check is one assertion on the lab's state; exactly one field is set.
type Check struct {
	Kind string `json:"-"` // the YAML key

	Distribution *DistributionCheck `json:"distribution,omitempty"`
	Status       *StatusCheck       `json:"status,omitempty"`
	Latency      *LatencyCheck      `json:"latency,omitempty"`
	Header       *HeaderCheck       `json:"header,omitempty"`
	ProxySynced  *ProxySyncedCheck  `json:"proxy-synced,omitempty"`
	Nack         *NackCheck         `json:"nack,omitempty"`
	Stat         *StatCheck         `json:"stat,omitempty"`
	Epoch        *EpochCheck        `json:"epoch,omitempty"`
	NoFailures   *struct{}          `json:"no-failures,omitempty"`
	Denied       *PodRef            `json:"denied,omitempty"`
	MTLS         *MTLSCheck         `json:"mtls,omitempty"`
	// ProxyStale wants the pod's proxy cut off from the control plane's current config:
	// disconnected, or STALE for a type. RootRotated wants the lab CA signing with a
	// root other than the one it had when the step began, every pod's certificate
	// issued by it.
	ProxyStale  *PodRef   `json:"proxy-stale,omitempty"`
	RootRotated *struct{} `json:"root-rotated,omitempty"`
	// ProxyRestarted wants the pod's live proxy to be another process than when the
	// step began (a hot restart, or a new epoch after a kill), and live.
	ProxyRestarted *PodRef `json:"proxy-restarted,omitempty"`
	// HBONE wants the edge From -> To (ambient pods) carried by the lab's ztunnel over
	// HBONE: see HBONECheck.
	HBONE *HBONECheck `json:"hbone,omitempty"`
}

// HBONECheck wants ztunnel to have carried connections From -> To (pods) over HBONE:
// its metrics count them, reported by the destination with
// connection_security_policy="mutual_tls", and its access log has a "connection
// complete" line for them with dst.hbone_addr (the tunnel to To's 15008).
type HBONECheck struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DistributionCheck compares the share of answers per version (the answering pod's
// "version" label, or the pod name when By is "pod") of the step's last traffic with
// Want (percentages), within Tolerance percentage points.
type DistributionCheck struct {
	Want      map[string]float64 `json:"want"`
	Tolerance *Percent           `json:"tolerance,omitempty"` // default 15%
	By        string             `json:"by,omitempty"`        // version (default) or pod
}

// StatusCheck counts answers with Code ("error" for no answer) in the last traffic
// (the last one sent from the pod From, when set): at least Min, at most Max, or a
// share of at least Fraction.
type StatusCheck struct {
	Code     string   `json:"code"`
	From     string   `json:"from,omitempty"`
	Min      *int     `json:"min,omitempty"`
	Max      *int     `json:"max,omitempty"`
	Fraction *Percent `json:"fraction,omitempty"`
}

// LatencyCheck compares a percentile (50, 90, 99 or 100) of the last traffic.
type LatencyCheck struct {
	Percentile int      `json:"percentile"`
	Below      Duration `json:"below,omitempty"`
	Above      Duration `json:"above,omitempty"`
}

// HeaderCheck asks for a response header in the step's last traffic: answers carrying
// Name (with Value, when set) number at least Min, at most Max, or a share of at least
// Fraction; with none of the three, every answer must carry it. Absent inverts the
// check: no answer may carry it (with Value, when set).
type HeaderCheck struct {
	Name     string   `json:"name"`
	Value    string   `json:"value,omitempty"`
	Min      *int     `json:"min,omitempty"`
	Max      *int     `json:"max,omitempty"`
	Fraction *Percent `json:"fraction,omitempty"`
	Absent   bool     `json:"absent,omitempty"`
}

// ProxySyncedCheck wants the pod's proxy SYNCED for Type (CDS, LDS, EDS, RDS, SDS;
// every type sent when empty).
type ProxySyncedCheck struct {
	Pod  string `json:"pod"`
	Type string `json:"type,omitempty"`
}

// NackCheck wants a NACK from the pod's proxy whose message contains Message.
type NackCheck struct {
	Pod     string `json:"pod"`
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

// StatCheck compares one counter or gauge of the pod's proxy (admin /stats).
type StatCheck struct {
	Pod   string `json:"pod"`
	Name  string `json:"name"`
	Op    string `json:"op"` // >, >=, ==, <, <=, !=
	Value uint64 `json:"value"`
}

// EpochCheck wants the pod's proxy to have reached (a LIVE) epoch AtLeast.
type EpochCheck struct {
	Pod     string `json:"pod"`
	AtLeast int    `json:"atLeast"`
}

// MTLSCheck asks that the edge From -> To (pods) used mTLS: From's sidecar made TLS
// handshakes to a service selecting To, To's sidecar accepted TLS on its inbound
// listener, and To's workload certificate is Identity (a SPIFFE ID; optional).
type MTLSCheck struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Identity string `json:"identity,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("250ms").
type Duration time.Duration
