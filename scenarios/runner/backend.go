package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/dataplane/ztunnel"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/lab/ambient"
	"github.com/meshlab/meshlab/netns"
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

// ZtunnelMetrics GETs /stats/prometheus from ztunnel's metrics port inside its network
// namespace, as Prometheus scrapes it.
func (b *LabBackend) ZtunnelMetrics(ctx context.Context) ([]byte, error) {
	key := model.PodKey(ambient.ZtunnelNamespace, ambient.ZtunnelPodName(b.name))
	ns := lab.NamespaceName(b.name, key)
	if _, err := os.Stat(b.paths.ZtunnelLog()); err != nil {
		return nil, lab.ErrNoZtunnel // it writes its log from its start
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.DialContext(ctx, ns, network, addr)
		},
		DisableKeepAlives: true,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", ztunnel.MetricsPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s's metrics: %w", key, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, api.MaxAnswerBytes))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s's metrics: %w", key, err)
	}
	return body, nil
}

// ZtunnelLog reads the end of the lab's ztunnel's log.
func (b *LabBackend) ZtunnelLog() ([]byte, error) {
	f, err := os.Open(b.paths.ZtunnelLog())
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
