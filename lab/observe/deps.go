// Package observe is how a running lab is watched: the topology of services, pods and
// the edges between them with rates (polled from the sidecars' stats while someone
// watches, with the epoch and certificate events that poll notices), the traffic tool
// (requests sent from inside a pod's namespace and counted by who answered), and the
// merge of every sidecar's Prometheus metrics. It reads the lab only through Deps, so
// it sits below package lab and never imports it.
package observe

import (
	"context"
	"io"
	"net"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// Deps is what observation needs of the lab.
type Deps interface {
	// Model is the lab's current model; callers do not modify it.
	Model() *model.Model
	// DialFrom opens a TCP connection to addr from inside the pod's network namespace,
	// where the pod's capture rules apply to it as to the app's own connections.
	DialFrom(ctx context.Context, pod, addr string) (net.Conn, error)
	// AgentStatus is the pod agent's /status.
	AgentStatus(ctx context.Context, pod string) (agentapi.Status, error)
	// AgentStats is the pod proxy's counters and gauges (/stats) whose names match
	// filter, an RE2 expression.
	AgentStats(ctx context.Context, pod, filter string) (map[string]uint64, error)
	// AgentGet GETs path ("/admin/...") from the pod's agent; any status other than 200
	// is an error. The caller closes the body.
	AgentGet(ctx context.Context, pod, path string) (io.ReadCloser, error)
	// Publish puts an event on the lab's bus.
	Publish(kind, pod, msg string, fields map[string]any)
	// Ztunnel is the lab's ztunnel pod (istio-system/ztunnel-<x>, not one of the
	// model's), nil when the lab runs none.
	Ztunnel() *model.Pod
	// ZtunnelMetrics is the ztunnel's /stats/prometheus (its metrics listener, 15020,
	// OpenMetrics text). The caller closes the body.
	ZtunnelMetrics(ctx context.Context) (io.ReadCloser, error)
}

// Event kinds published while the topology is polled.
const (
	// EventEpochChanged: a proxy epoch changed state (Fields: epoch, state, pid).
	EventEpochChanged = "epoch.state"
	// EventCertIssued and EventCertRotated report a pod's agent getting its first
	// certificate and replacing it (Fields: serial, notAfter, rotations, spiffeID).
	EventCertIssued  = "cert.issued"
	EventCertRotated = "cert.rotated"
)
