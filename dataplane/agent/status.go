package agent

import (
	"context"
	"strings"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// buildStatus assembles the agent's Status from the epoch manager and the readiness check.
func buildStatus(ctx context.Context, pod string, mgr *epochManager, ready readiness) agentapi.Status {
	snap := mgr.snapshot()
	var msg []string
	rerr := ready.check(ctx)
	if rerr != nil {
		msg = append(msg, "not ready: "+rerr.Error())
	}
	if snap.lastExit != "" {
		msg = append(msg, "last unexpected proxy exit: "+snap.lastExit)
	}
	st := agentapi.Status{
		Pod: pod, Ready: rerr == nil, Epochs: snap.epochs, Restarts: snap.restarts,
		Message: strings.Join(msg, "\n"), Failed: snap.failed, ConsecutiveFailures: snap.failures,
		NextRestartAt: snap.nextRestart, Settings: snap.settings,
	}
	// The binary of the newest epoch that got as far as starting.
	for i := len(snap.epochs) - 1; i >= 0; i-- {
		if e := snap.epochs[i]; e.ProxyPath != "" {
			st.ProxyPath, st.ProxyVersion, st.DataPlane = e.ProxyPath, e.ProxyVersion, e.DataPlane
			break
		}
	}
	return st
}
