package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/lab/ambient"
	"github.com/meshlab/meshlab/lab/caops"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

// below is the lab as the packages below it see it (the Deps of lab/observe,
// lab/trace, lab/caops and lab/faults): its model, its pods' agents, namespaces and proxy logs, and
// its event bus. It holds no state of its own.
type below struct{ l *Lab }

func (l *Lab) below() below { return below{l} }

// Model returns the current model.
func (b below) Model() *model.Model {
	b.l.mu.Lock()
	defer b.l.mu.Unlock()
	return b.l.model
}

// key resolves a pod reference (its key, or a name as model.LookupPod reads one) to the
// pod's key, which names its namespace and run directory; a reference that names no pod
// is returned as it is (the call then fails on a path that does not exist).
func (b below) key(pod string) string {
	if p := b.Model().Pod(pod); p != nil {
		return p.Key()
	}
	return pod
}

// DialFrom connects to addr over TCP from inside the pod's namespace.
func (b below) DialFrom(ctx context.Context, pod, addr string) (net.Conn, error) {
	return netns.DialContext(ctx, NamespaceName(b.l.opts.Name, b.key(pod)), "tcp", addr)
}

// AgentStatus is the pod agent's /status.
func (b below) AgentStatus(ctx context.Context, pod string) (agentapi.Status, error) {
	c := b.l.agentClient(b.key(pod))
	defer c.Close()
	return c.Status(ctx)
}

// AgentStats is the pod proxy's counters and gauges whose names match the RE2 filter.
func (b below) AgentStats(ctx context.Context, pod, filter string) (map[string]uint64, error) {
	c := b.l.agentClient(b.key(pod))
	defer c.Close()
	st, err := c.Stats(ctx, filter)
	return st.Values, err
}

// AgentGet GETs path, "/admin/<path>?<query>", the pod proxy's admin API through its
// agent (an error unless 200); closing the body releases the connection.
func (b below) AgentGet(ctx context.Context, pod, path string) (io.ReadCloser, error) {
	pq, ok := strings.CutPrefix(path, agentapi.PathAdmin)
	if !ok {
		return nil, fmt.Errorf("get %s from the agent of %s: only %s paths are served to lab packages", path, pod, agentapi.PathAdmin)
	}
	c := b.l.agentClient(b.key(pod))
	body, err := c.Admin(ctx, pq)
	if err != nil {
		c.Close()
		return nil, err
	}
	return agentBody{body, c}, nil
}

// agentBody closes the client's connections with the body.
type agentBody struct {
	io.ReadCloser
	c *agentapi.Client
}

func (a agentBody) Close() error {
	err := a.ReadCloser.Close()
	a.c.Close()
	return err
}

// Publish puts an event on the lab's bus.
func (b below) Publish(kind, pod, msg string, fields map[string]any) {
	b.l.publish(kind, pod, msg, fields)
}

// CaptureRules is `iptables-save -c` in the pod's namespace.
func (b below) CaptureRules(pod string) (string, error) {
	return capture.Save(NamespaceName(b.l.opts.Name, b.key(pod)))
}

// AccessLogFile is where a pod's proxy writes its access log: the pod's proxy log for
// /dev/stdout and /dev/stderr (the agent captures both), else the file itself; "" when
// access logs are off.
func (b below) AccessLogFile(pod, meshPath string) string {
	switch meshPath {
	case "":
		return ""
	case "/dev/stdout", "/dev/stderr":
		return b.l.paths.PodDir(b.key(pod)) + "/proxy.log"
	}
	return meshPath
}

// AgentCert reads the pod agent's workload certificate (GET /certs) or asks it to renew,
// pause or resume (POST /certs/<op>); a renewal the agent refuses because it is paused is
// agentapi.ErrRenewalPaused (errors.Is).
func (b below) AgentCert(ctx context.Context, pod string, op caops.CertOp) (agentapi.CertStatus, error) {
	c := b.l.agentClient(b.key(pod))
	defer c.Close()
	switch op {
	case caops.CertRead:
		return c.Cert(ctx)
	case caops.CertRenew:
		return c.RenewCert(ctx)
	case caops.CertPause, caops.CertResume:
		return c.PauseRenewal(ctx, op == caops.CertPause)
	}
	return agentapi.CertStatus{}, fmt.Errorf("certificate operation %q of pod %s: not one of read, renew, pause, resume", op, pod)
}

// SidecarPod is the pod named name if it has a sidecar.
func (b below) SidecarPod(name string) (*model.Pod, error) { return b.l.sidecarPod(name) }

// SidecarPodNames lists the pods with a sidecar, sorted.
func (b below) SidecarPodNames() []string { return b.l.sidecarPodNames() }

// SetCAClockOffset shifts the lab CA's clock.
func (b below) SetCAClockOffset(d time.Duration) { b.l.SetCAClockOffset(d) }

// PodPIDs lists the processes in the pod's network namespace.
func (b below) PodPIDs(pod string) ([]int, error) {
	return b.l.syscalls().procs.PIDsIn(NamespaceName(b.l.opts.Name, b.key(pod)))
}

// Cmdline is the process's argv from /proc; nil for a process that is gone.
func (below) Cmdline(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
}

// Ztunnel is the lab's ztunnel pod, nil when it runs none (ztunnel.go).
func (b below) Ztunnel() *model.Pod { return ztunnelPod(b.l) }

// ZtunnelLogFile is the ztunnel's log (ztunnel.go).
func (b below) ZtunnelLogFile() string { return ZtunnelLogFile(b.l.paths) }

// ZtunnelMetrics is the ztunnel's /stats/prometheus (15020 in its namespace);
// ErrNoZtunnel when the lab runs none.
func (b below) ZtunnelMetrics(ctx context.Context) (io.ReadCloser, error) {
	z := ztunnelPod(b.l)
	if z == nil {
		return nil, ErrNoZtunnel
	}
	return ambient.MetricsGet(ctx, NamespaceName(b.l.opts.Name, z.Key()), "/stats/prometheus")
}

// Kill sends the process SIGKILL.
func (b below) Kill(pid int) error { return b.l.syscalls().procs.Signal(pid, syscall.SIGKILL) }
