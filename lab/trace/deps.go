// Package trace explains one request's path through a running lab: it sends one GET
// tagged with a unique x-request-id from inside a pod's namespace and, from what changed
// meanwhile (capture rule counters, proxy stats), the proxies' config_dump (with each
// resource's origin), their access log lines and the demo app's echo, tells which capture
// rules, listeners, routes, clusters and endpoints it took, with mTLS and RBAC. It reads
// the lab only through Deps, so it sits below package lab and never imports it.
package trace

import (
	"context"
	"io"
	"net"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Deps is what a trace needs of the lab.
type Deps interface {
	// Model is the lab's current model; callers do not modify it.
	Model() *model.Model
	// DialFrom opens a TCP connection to addr from inside the pod's network namespace,
	// where the pod's capture rules apply to it as to the app's own connections.
	DialFrom(ctx context.Context, pod, addr string) (net.Conn, error)
	// AgentGet GETs path ("/admin/stats", "/admin/config_dump") from the pod's agent;
	// any status other than 200 is an error. The caller closes the body.
	AgentGet(ctx context.Context, pod, path string) (io.ReadCloser, error)
	// CaptureRules is `iptables-save -c` in the pod's namespace (rules with counters).
	CaptureRules(pod string) (string, error)
	// AccessLogFile is the file the pod's proxy writes the mesh's access log path
	// (MeshConfig accessLogFile) to; "" when access logs are off.
	AccessLogFile(pod, meshPath string) string
	// Publish puts an event on the lab's bus.
	Publish(kind, pod, msg string, fields map[string]any)
	// Ztunnel is the lab's ztunnel pod, nil when the lab runs none.
	Ztunnel() *model.Pod
	// ZtunnelLogFile is the ztunnel's log, where its access log lines are.
	ZtunnelLogFile() string
}
