package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/web"
)

var _ web.ProxyBackend = (*Lab)(nil)

// restartPoll is how often RestartProxy asks the agent whether the new epoch is live.
const restartPoll = 10 * time.Millisecond

// PodDetail implements web.PodDescriber: the pod's summary and its agent's full status.
func (l *Lab) PodDetail(ctx context.Context, name string) (api.PodDetail, error) {
	if z := ztunnelPod(l); z != nil && (name == z.Key() || name == z.Name) {
		return ztunnelDetail(l, z), nil // ztunnel.go
	}
	p, err := l.podNamed(name)
	if err != nil {
		return api.PodDetail{}, err
	}
	d := api.PodDetail{
		PodStatus: api.PodStatus{Name: p.Name, Namespace: p.Namespace, Key: p.Key(), NetNS: NamespaceName(l.opts.Name, p.Key()),
			IP: p.IP, Sidecar: p.Sidecar.Inject, Epoch: -1},
		Labels: p.Labels, ServiceAccount: p.ServiceAccount,
	}
	fillDataplane(l, p, &d) // nodeagent.go
	if !p.Sidecar.Inject {
		d.Ready = d.Ambient == nil || d.Ambient.Redirection == model.AmbientRedirectionEnabled
		return d, nil
	}
	l.podview.FillPod(ctx, podAgents{l}, &d.PodStatus)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c := l.agentClient(p.Key())
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return d, nil // FillPod said why in Message
	}
	d.Proxy = agentStatus(st)
	return d, nil
}

// RestartProxy implements web.ProxyRestarter: it asks the pod's agent for a new epoch
// (which the agent starts once the current one is LIVE) and, when wait is set, polls
// until the new epoch is LIVE, exits, or ctx ends.
func (l *Lab) RestartProxy(ctx context.Context, name string, wait bool) (api.ProxyRestart, error) {
	p, err := l.podNamed(name)
	if err != nil {
		return api.ProxyRestart{}, err
	}
	if !p.Sidecar.Inject {
		return api.ProxyRestart{}, fmt.Errorf("restart proxy of pod %s: %w", name, api.ErrNoSidecar)
	}
	start := time.Now()
	c := l.agentClient(p.Key())
	defer c.Close()
	res, err := c.Restart(ctx)
	if err != nil {
		return api.ProxyRestart{}, fmt.Errorf("restart proxy of pod %s: %w", name, err)
	}
	out := api.ProxyRestart{Pod: name, Epoch: res.Epoch}
	if !res.Restarted {
		out.Message = "no epoch was started: the pod's proxy has failed (see meshlab describe pod " + name + ")"
		return out, nil
	}
	l.publish(EventEpochChanged, name, fmt.Sprintf("proxy epoch %d started by a restart", res.Epoch),
		map[string]any{"epoch": res.Epoch, "state": agentapi.EpochStarting})
	if !wait {
		out.Elapsed = time.Since(start)
		return out, nil
	}
	for {
		st, err := c.Status(ctx)
		if err == nil {
			if e, ok := findEpoch(st.Epochs, res.Epoch); ok {
				switch e.State {
				case agentapi.EpochLive, agentapi.EpochDraining:
					out.Live, out.Elapsed = true, time.Since(start)
					l.publish(EventEpochChanged, name, fmt.Sprintf("proxy epoch %d is live after %s", res.Epoch, out.Elapsed.Round(time.Millisecond)),
						map[string]any{"epoch": res.Epoch, "state": agentapi.EpochLive, "ms": out.Elapsed.Milliseconds()})
					return out, nil
				case agentapi.EpochExited:
					out.Elapsed = time.Since(start)
					out.Message = fmt.Sprintf("epoch %d exited before it was live: %s", res.Epoch, e.Error)
					if st.Message != "" {
						out.Message += "\n" + st.Message
					}
					return out, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			out.Elapsed = time.Since(start)
			out.Message = fmt.Sprintf("epoch %d was not live after %s", res.Epoch, out.Elapsed.Round(time.Millisecond))
			return out, nil
		case <-time.After(restartPoll):
		}
	}
}

// PodKey returns the key (model.PodKey) of the pod ref names as model.LookupPod reads
// it, or ref itself when it names none: the key names the pod's run directory.
func (l *Lab) PodKey(ref string) string {
	if p, err := l.podNamed(ref); err == nil {
		return p.Key()
	}
	return ref
}

// podNamed returns the named pod of the current model, or api.ErrUnknownPod.
func (l *Lab) podNamed(name string) (*model.Pod, error) {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	p, err := m.LookupPod(name)
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, api.ErrUnknownPod)
	}
	if p == nil {
		return nil, fmt.Errorf("pod %q: %w", name, api.ErrUnknownPod)
	}
	return p, nil
}

func findEpoch(eps []agentapi.EpochStatus, epoch int) (agentapi.EpochStatus, bool) {
	for i := len(eps) - 1; i >= 0; i-- {
		if eps[i].Epoch == epoch {
			return eps[i], true
		}
	}
	return agentapi.EpochStatus{}, false
}

// agentStatus converts the agent's Status to the API's shape.
func agentStatus(st agentapi.Status) *api.AgentStatus {
	out := &api.AgentStatus{
		Ready: st.Ready, ProxyPath: st.ProxyPath, ProxyVersion: st.ProxyVersion, DataPlane: st.DataPlane,
		Restarts: st.Restarts, Message: st.Message, Failed: st.Failed, ConsecutiveFailures: st.ConsecutiveFailures,
		NextRestartAt: st.NextRestartAt,
		Settings: api.ProxySettings{
			LogLevel: st.Settings.LogLevel, Concurrency: st.Settings.Concurrency,
			DrainDuration:          time.Duration(st.Settings.DrainDuration).String(),
			ParentShutdownDuration: time.Duration(st.Settings.ParentShutdownDuration).String(),
			ProxyPath:              st.Settings.ProxyPath,
		},
	}
	out.Cert = workloadCert(st.Cert)
	if pl := st.Proxyless; pl != nil {
		out.Proxyless = &api.ProxylessAgent{Bootstrap: pl.Bootstrap, XDSSocket: pl.XDSSocket, CertDir: pl.CertDir,
			Relayed: pl.Relay.Total, LastError: pl.Relay.LastError, LastErrorAt: pl.Relay.LastErrorAt}
		for _, s := range pl.Relay.Streams {
			kind := "sotw"
			if s.Delta {
				kind = "delta"
			}
			out.Proxyless.Streams = append(out.Proxyless.Streams, fmt.Sprintf("%s (%s, %d requests, %d responses)", s.Node, kind, s.Requests, s.Responses))
		}
	}
	for _, e := range st.Epochs {
		out.Epochs = append(out.Epochs, api.ProxyEpoch{
			Epoch: e.Epoch, PID: e.PID, State: e.State, StartedAt: e.StartedAt, ExitedAt: e.ExitedAt,
			ExitCode: e.ExitCode, Error: e.Error, Reason: e.Reason, ProxyPath: e.ProxyPath,
			ProxyVersion: e.ProxyVersion, DataPlane: e.DataPlane,
		})
	}
	return out
}
