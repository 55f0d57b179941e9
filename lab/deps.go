package lab

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
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

// DialFrom connects to addr over TCP from inside the pod's namespace.
func (b below) DialFrom(ctx context.Context, pod, addr string) (net.Conn, error) {
	return netns.DialContext(ctx, NamespaceName(b.l.opts.Name, pod), "tcp", addr)
}

// AgentStatus is the pod agent's /status.
func (b below) AgentStatus(ctx context.Context, pod string) (agent.Status, error) {
	c := newAgentClient(b.l.paths.AgentSocket(pod))
	defer c.close()
	return c.status(ctx)
}

// AgentStats is the pod proxy's integer stats whose names match the escaped RE2 filter.
func (b below) AgentStats(ctx context.Context, pod, filter string) (map[string]uint64, error) {
	c := newAgentClient(b.l.paths.AgentSocket(pod))
	defer c.close()
	return c.stats(ctx, filter)
}

// AgentGet GETs path from the pod's agent (an error unless 200); closing the body
// releases the connection.
func (b below) AgentGet(ctx context.Context, pod, path string) (io.ReadCloser, error) {
	c := newAgentClient(b.l.paths.AgentSocket(pod))
	resp, err := c.get(ctx, path)
	if err != nil {
		c.close()
		return nil, err
	}
	return agentBody{resp.Body, c}, nil
}

// agentBody closes the client's connections with the body.
type agentBody struct {
	io.ReadCloser
	c *agentClient
}

func (a agentBody) Close() error {
	err := a.ReadCloser.Close()
	a.c.close()
	return err
}

// Publish puts an event on the lab's bus.
func (b below) Publish(kind, pod, msg string, fields map[string]any) {
	b.l.publish(kind, pod, msg, fields)
}

// CaptureRules is `iptables-save -c` in the pod's namespace.
func (b below) CaptureRules(pod string) (string, error) {
	return capture.Save(NamespaceName(b.l.opts.Name, pod))
}

// AccessLogFile is where a pod's proxy writes its access log: the pod's proxy log for
// /dev/stdout and /dev/stderr (the agent captures both), else the file itself; "" when
// access logs are off.
func (b below) AccessLogFile(pod, meshPath string) string {
	switch meshPath {
	case "":
		return ""
	case "/dev/stdout", "/dev/stderr":
		return b.l.paths.PodDir(pod) + "/proxy.log"
	}
	return meshPath
}

// AgentCert reads the pod agent's workload certificate (GET /certs) or asks it to renew,
// pause or resume (POST /certs/<op>); a renewal the agent refuses because it is paused is
// agent.ErrRenewalPaused.
func (b below) AgentCert(ctx context.Context, pod string, op caops.CertOp) (agent.CertStatus, error) {
	c := newAgentClient(b.l.paths.AgentSocket(pod))
	defer c.close()
	var st agent.CertStatus
	if op == caops.CertRead {
		resp, err := c.get(ctx, "/certs")
		if err != nil {
			return st, err
		}
		defer resp.Body.Close()
		return st, json.NewDecoder(resp.Body).Decode(&st)
	}
	if err := c.post(ctx, "/certs/"+string(op), &st); err != nil {
		if strings.Contains(err.Error(), agent.ErrRenewalPaused.Error()) {
			return st, agent.ErrRenewalPaused
		}
		return st, err
	}
	return st, nil
}

// SidecarPod is the pod named name if it has a sidecar.
func (b below) SidecarPod(name string) (*model.Pod, error) { return b.l.sidecarPod(name) }

// SidecarPodNames lists the pods with a sidecar, sorted.
func (b below) SidecarPodNames() []string { return b.l.sidecarPodNames() }

// SetCAClockOffset shifts the lab CA's clock.
func (b below) SetCAClockOffset(d time.Duration) { b.l.SetCAClockOffset(d) }

// PodPIDs lists the processes in the pod's network namespace.
func (b below) PodPIDs(pod string) ([]int, error) {
	return netns.PIDsIn(NamespaceName(b.l.opts.Name, pod))
}

// Cmdline is the process's argv from /proc; nil for a process that is gone.
func (below) Cmdline(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
}

// Kill sends the process SIGKILL.
func (below) Kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
