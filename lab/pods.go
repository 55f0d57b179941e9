package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/demoapp"
)

// Ports of the pod agent, as pilot-agent's.
const (
	adminPort  = 15000
	statusPort = 15020
	dnsPort    = 15053
)

// startPods creates every pod in parallel and waits until each is ready.
func (l *Lab) startPods(ctx context.Context) error {
	l.agents = newGroup(l.log.With("component", "supervisor"), l.jr)
	l.apps = newGroup(l.log.With("component", "supervisor"), l.jr)
	l.agents.publish, l.apps.publish = l.publish, l.publish
	ctx, cancel := context.WithTimeout(ctx, l.opts.ReadyTimeout)
	defer cancel()
	var eg errgroup.Group
	for i, p := range l.model.Pods {
		eg.Go(func() error { return l.startPod(ctx, i, p) })
	}
	return eg.Wait()
}

func (l *Lab) startPod(ctx context.Context, index int, p *model.Pod) error {
	start := time.Now()
	dir := l.paths.PodDir(p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create run directory of pod %s: %w", p.Name, err)
	}
	if err := l.createPodNetwork(p.Name, p.IP, p.Sidecar.Inject); err != nil {
		return err
	}
	l.publish(EventPodCreated, p.Name, fmt.Sprintf("pod %s created: namespace %s, %s", p.Name, NamespaceName(l.opts.Name, p.Name), p.IP),
		map[string]any{"ip": p.IP.String(), "sidecar": p.Sidecar.Inject})
	ns := NamespaceName(l.opts.Name, p.Name)
	if p.Sidecar.Inject {
		argv := append([]string{l.opts.MeshlabPath, "agent", "--log-level=info"}, agent.Args(l.agentConfig(index, p))...)
		err := l.agents.start(processSpec{
			Role: "agent", Pod: p.Name, NetNS: ns, Argv: argv, LogPath: dir + "/agent.log",
			Grace: l.opts.TerminationDrain + 10*time.Second,
		})
		if err != nil {
			return err
		}
		if p.Sidecar.HoldApplicationUntilProxyStarts {
			if err := l.waitReady(ctx, p.Name); err != nil {
				return err
			}
		}
	}
	err := l.apps.start(processSpec{
		Role: "app", Pod: p.Name, NetNS: ns, Argv: l.appArgv(p), UID: AppUID,
		LogPath: dir + "/app.log", Grace: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	if p.Sidecar.Inject {
		if err := l.waitReady(ctx, p.Name); err != nil {
			return err
		}
	}
	took := time.Since(start).Round(time.Millisecond)
	l.publish(EventPodReady, p.Name, fmt.Sprintf("pod %s ready in %s", p.Name, took), map[string]any{"ms": took.Milliseconds()})
	fmt.Fprintf(l.out, "pod %-20s %-15s ready in %s\n", p.Name, p.IP, took)
	return nil
}

func (l *Lab) agentConfig(index int, p *model.Pod) agent.Config {
	return agent.Config{
		Lab:                      l.opts.Name,
		Pod:                      p.Name,
		Namespace:                p.Namespace,
		PodIP:                    p.IP,
		NodeID:                   p.NodeID(),
		ServiceCluster:           p.ServiceCluster(),
		Workload:                 p.Workload,
		Labels:                   p.Labels,
		ServiceAccount:           p.ServiceAccount,
		RunDir:                   l.paths.PodDir(p.Name),
		XDSSocket:                l.paths.XDSSocket(),
		LabSocket:                l.paths.APISocket(),
		ProxyPath:                cmp.Or(p.Sidecar.ProxyPath, l.opts.ProxyPath),
		MeshlabPath:              l.opts.MeshlabPath,
		ProxyUID:                 ProxyUID,
		ProxyGID:                 ProxyUID,
		BaseID:                   baseID(l.opts.Name, index),
		LogLevel:                 p.Sidecar.LogLevel,
		TerminationDrainDuration: l.opts.TerminationDrain,
		AdminPort:                adminPort,
		StatusPort:               statusPort,
		DNSPort:                  dnsPort,
	}
}

func (l *Lab) appArgv(p *model.Pod) []string {
	if len(p.App.Command) > 0 {
		return p.App.Command
	}
	svc := p.Labels["app"]
	if ss := l.model.ServicesFor(p); len(ss) > 0 {
		svc = ss[0].Name
	}
	cfg := demoapp.Config{
		Service:   svc,
		Pod:       p.Name,
		Namespace: p.Namespace,
		Version:   p.Labels["version"],
		Ports:     p.Ports,
		Upstreams: p.App.Upstreams,
	}
	return append([]string{l.opts.MeshlabPath, "app"}, demoapp.Args(cfg)...)
}

// waitReady polls the pod's agent until it reports ready.
func (l *Lab) waitReady(ctx context.Context, pod string) error {
	c := newAgentClient(l.paths.AgentSocket(pod))
	defer c.close()
	var last string
	for {
		st, err := c.status(ctx)
		if err == nil && st.Ready {
			return nil
		}
		if err == nil {
			last = st.Message
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				msg := fmt.Sprintf("pod %s did not become ready within %s", pod, l.opts.ReadyTimeout)
				if last != "" {
					msg += ": " + last
				}
				return fmt.Errorf("%s (see %s)", msg, l.paths.PodDir(pod))
			}
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
