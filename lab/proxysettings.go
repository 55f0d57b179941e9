package lab

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// settingsPushTimeout bounds one PUT /proxy-config: the agent answers once the new epoch
// is started, which waits until the current one is LIVE.
const settingsPushTimeout = 15 * time.Second

// pushProxySettings sends the proxy settings of every sidecar pod of next whose settings
// differ from prev's to its agent (PUT /proxy-config), in parallel. The agent starts a new
// epoch only when they differ from what its proxy runs with, so a repeated push is a
// no-op. A failure is logged and published, not returned: the model is already current,
// and `meshlab describe pod` shows the agent's state.
func (l *Lab) pushProxySettings(ctx context.Context, prev, next *model.Model) {
	var wg sync.WaitGroup
	for i, p := range next.Pods {
		old := prev.Pod(p.Key())
		if !p.Sidecar.Inject || old == nil || reflect.DeepEqual(old.Sidecar, p.Sidecar) {
			continue
		}
		settings := l.agentConfig(i, p).ProxySettings()
		wg.Go(func() { l.pushPodSettings(ctx, p.Key(), settings) })
	}
	wg.Wait()
}

func (l *Lab) pushPodSettings(ctx context.Context, pod string, s agentapi.ProxySettings) {
	ctx, cancel := context.WithTimeout(ctx, settingsPushTimeout)
	defer cancel()
	c := l.agentClient(pod)
	defer c.Close()
	res, err := c.SetProxyConfig(ctx, s)
	if err != nil {
		l.log.Error("push proxy settings", "pod", pod, "err", err)
		l.publish(EventEpochChanged, pod, fmt.Sprintf("proxy settings of pod %s not applied: %v", pod, err),
			map[string]any{"error": err.Error()})
		return
	}
	if !res.Restarted {
		l.log.Info("proxy settings unchanged in the agent", "pod", pod)
		return
	}
	l.log.Info("proxy settings changed, new epoch started", "pod", pod, "epoch", res.Epoch)
	l.publish(EventEpochChanged, pod, fmt.Sprintf("proxy epoch %d started: proxy settings changed", res.Epoch),
		map[string]any{"epoch": res.Epoch, "state": agentapi.EpochStarting, "reason": agentapi.ReasonConfig})
}
