package lab

import (
	"context"
	"fmt"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/web"
)

// EventControlPlaneRestarted reports a restart of the lab's control plane (Fields:
// controlPlane, streams, trustDomain).
const EventControlPlaneRestarted = "controlplane.restarted"

// controlPlaneRestart is the lab's web.ControlPlaneRestarter: `rollout restart deployment
// istiod -n istio-system`. istiod's Deployment is the lab's control plane, which lives in
// the lab process, so a restart is what the proxies and the CA see of one: the mesh
// config is read again (the CA's trust domain with it; it follows every apply too, as
// istiod's mesh watcher does), every xDS stream ends and each proxy reconnects and is sent
// its config afresh, certificates stay until their agents renew them. With istiod as the
// control plane, its process is replaced by a new one fed the same objects.
type controlPlaneRestart struct{ l *Lab }

var _ web.ControlPlaneRestarter = controlPlaneRestart{}

func (r controlPlaneRestart) RestartControlPlane(ctx context.Context) (api.ControlPlaneRestart, error) {
	l := r.l
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	out := api.ControlPlaneRestart{ControlPlane: "meshlab", TrustDomain: m.Mesh.Domain()}
	if l.ca != nil {
		l.ca.Authority().SetTrustDomain(m.Mesh.TrustDomain)
	}
	if l.istiod != nil {
		out.ControlPlane = "istiod"
		if err := l.istiod.Restart(ctx, m, "rollout restart deployment istiod"); err != nil {
			return out, fmt.Errorf("restart istiod: %w", err)
		}
	}
	if l.disc != nil {
		out.Streams = l.disc.Restart()
	}
	l.publish(EventControlPlaneRestarted, "", fmt.Sprintf("control plane (%s) restarted: %d xDS connections ended, proxies reconnect; certificates are issued in trust domain %s", out.ControlPlane, out.Streams, out.TrustDomain),
		map[string]any{"controlPlane": out.ControlPlane, "streams": out.Streams, "trustDomain": out.TrustDomain})
	return out, nil
}
