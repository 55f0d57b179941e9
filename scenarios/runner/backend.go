package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/lab"
)

// Backend is what the runner needs of a running lab. Safe for concurrent use; every
// method may block on the lab's agents and honours ctx.
type Backend interface {
	Apply(ctx context.Context, files []api.ConfigFile) ([]api.Change, error)
	Delete(ctx context.Context, files []api.ConfigFile, refs []api.ObjectRef) ([]api.Change, error)
	SendTraffic(ctx context.Context, r api.TrafficRequest) (api.TrafficResult, error)
	RestartProxy(ctx context.Context, pod string, wait bool) (api.ProxyRestart, error)
	PodDetail(ctx context.Context, pod string) (api.PodDetail, error)
	ProxyStatus() []api.ProxyStatus
	// WaitSynced waits until every change applied so far is pushed and every proxy of
	// the lab's pods runs the config it was sent, judged per xDS stream as `apply --wait`
	// judges it (lab.WaitSynced), and names the first proxy that does not when ctx ends.
	WaitSynced(ctx context.Context) error
	// Stats returns the counters and gauges of the pod's proxy (admin /stats).
	Stats(ctx context.Context, pod string) (map[string]uint64, error)
	// AddFault adds a fault to the lab's machinery (here: discovery-stop).
	AddFault(ctx context.Context, spec api.FaultSpec) (api.Fault, error)
	// RotateRoot rotates the lab CA to a new root, returning once every agent renewed.
	RotateRoot(ctx context.Context) error
	// KillProxy sends SIGKILL to the pod's live proxy and returns its pid.
	KillProxy(ctx context.Context, pod string) (int, error)
	// ClearFaults clears the fault id, or every fault when id is "".
	ClearFaults(ctx context.Context, id string) ([]api.Fault, error)
	// Faults lists the faults in effect.
	Faults() []api.Fault
	// CAStatus reports the lab CA's roots and every pod's certificate.
	CAStatus(ctx context.Context) (api.CAStatus, error)
	// ZtunnelMetrics returns the lab's ztunnel's metrics (Prometheus text, its 15020
	// /stats/prometheus) and ZtunnelLog the end of its log; both fail while the lab runs
	// no ztunnel (no pod is in ambient mode yet).
	ZtunnelMetrics(ctx context.Context) ([]byte, error)
	ZtunnelLog() ([]byte, error)
}

// LabBackend is a Backend over a lab running in this process.
type LabBackend struct {
	*lab.Lab
	paths lab.Paths
	name  string
}

var _ Backend = (*LabBackend)(nil)

// NewLabBackend wraps l, whose run directory is under runRoot (lab.DefaultRunRoot when
// empty) with the given name.
func NewLabBackend(l *lab.Lab, runRoot, name string) *LabBackend {
	if runRoot == "" {
		runRoot = lab.DefaultRunRoot
	}
	return &LabBackend{Lab: l, paths: lab.PathsFor(runRoot, name), name: name}
}

// WaitSynced is `apply --wait`'s wait (GET /v1/synced): per stream, not the node's
// merged state.
func (b *LabBackend) WaitSynced(ctx context.Context) error { return lab.WaitSynced(ctx, b.Lab) }

// Stats reads the pod's proxy stats through its agent's admin proxy.
func (b *LabBackend) Stats(ctx context.Context, pod string) (map[string]uint64, error) {
	c := agentapi.NewClient(b.paths.AgentSocket(b.PodKey(pod)))
	defer c.Close()
	st, err := c.Stats(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read stats of %s: %w", pod, err)
	}
	return st.Values, nil
}

// KillProxy SIGKILLs the pod's newest live proxy epoch; its agent restarts it.
func (b *LabBackend) KillProxy(ctx context.Context, pod string) (int, error) {
	pid, err := livePID(ctx, b, pod)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill proxy %d of %s: %w", pid, pod, err)
	}
	return pid, nil
}

// livePID returns the pid of the pod's newest live epoch.
func livePID(ctx context.Context, b Backend, pod string) (int, error) {
	d, err := b.PodDetail(ctx, pod)
	if err != nil {
		return 0, fmt.Errorf("describe pod %s: %w", pod, err)
	}
	if d.Proxy == nil {
		return 0, errors.New("pod " + pod + " has no proxy status")
	}
	pid, epoch := 0, -1
	for _, e := range d.Proxy.Epochs {
		if e.State == "live" && e.Epoch > epoch && e.PID > 0 {
			pid, epoch = e.PID, e.Epoch
		}
	}
	if pid == 0 {
		return 0, errors.New("pod " + pod + " has no live proxy")
	}
	return pid, nil
}

// ztunnelLogTail bounds how much of ztunnel's log a check reads: its end.
const ztunnelLogTail = 1 << 20

// ZtunnelMetrics reads ztunnel's metrics (lab.ZtunnelMetrics).
func (b *LabBackend) ZtunnelMetrics(ctx context.Context) ([]byte, error) {
	if _, err := os.Stat(lab.ZtunnelLogFile(b.paths)); err != nil {
		return nil, lab.ErrNoZtunnel // it writes its log from its start
	}
	return lab.ZtunnelMetrics(ctx, b.name)
}

// ZtunnelLog reads the end of the lab's ztunnel's log.
func (b *LabBackend) ZtunnelLog() ([]byte, error) {
	f, err := os.Open(lab.ZtunnelLogFile(b.paths))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, lab.ErrNoZtunnel
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > ztunnelLogTail {
		if _, err := f.Seek(st.Size()-ztunnelLogTail, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(f)
}
