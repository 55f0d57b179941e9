package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

// fakeProxyBackend knows one pod with a sidecar ("backend-v1") and one without ("db").
type fakeProxyBackend struct {
	waits []bool
}

func (f *fakeProxyBackend) PodDetail(_ context.Context, pod string) (api.PodDetail, error) {
	switch pod {
	case "backend-v1":
		return api.PodDetail{PodStatus: api.PodStatus{Name: pod, Sidecar: true, Epoch: 1},
			Proxy: &api.AgentStatus{Ready: true, Epochs: []api.ProxyEpoch{{Epoch: 0, State: "exited"}, {Epoch: 1, State: "live", PID: 42}}}}, nil
	case "db":
		return api.PodDetail{PodStatus: api.PodStatus{Name: pod}}, nil
	}
	return api.PodDetail{}, fmt.Errorf("pod %q: %w", pod, api.ErrUnknownPod)
}

func (f *fakeProxyBackend) RestartProxy(_ context.Context, pod string, wait bool) (api.ProxyRestart, error) {
	f.waits = append(f.waits, wait)
	switch pod {
	case "backend-v1":
		return api.ProxyRestart{Pod: pod, Epoch: 2, Live: wait, Elapsed: 120 * time.Millisecond}, nil
	case "db":
		return api.ProxyRestart{}, fmt.Errorf("restart proxy of pod db: %w", api.ErrNoSidecar)
	}
	return api.ProxyRestart{}, fmt.Errorf("pod %q: %w", pod, api.ErrUnknownPod)
}

func TestProxyRoutes(t *testing.T) {
	fb := &fakeProxyBackend{}
	c := serveUnix(t, ProxyRoutes(fb))
	ctx := context.Background()

	d, err := c.PodDetail(ctx, "backend-v1")
	if err != nil || d.Proxy == nil || len(d.Proxy.Epochs) != 2 || d.Proxy.Epochs[1].PID != 42 {
		t.Errorf("PodDetail = %+v, %v", d, err)
	}
	if _, err := c.PodDetail(ctx, "nope"); !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "unknown pod") {
		t.Errorf("unknown pod: %v, want a 404", err)
	}
	r, err := c.RestartProxy(ctx, "backend-v1", true)
	if err != nil || r.Epoch != 2 || !r.Live || r.Elapsed != 120*time.Millisecond {
		t.Errorf("RestartProxy = %+v, %v", r, err)
	}
	if r, err := c.RestartProxy(ctx, "backend-v1", false); err != nil || r.Live {
		t.Errorf("RestartProxy without waiting = %+v, %v", r, err)
	}
	if len(fb.waits) != 2 || !fb.waits[0] || fb.waits[1] {
		t.Errorf("wait flags = %v, want [true false]", fb.waits)
	}
	if _, err := c.RestartProxy(ctx, "db", true); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "pod has no sidecar") {
		t.Errorf("restart without sidecar: %v", err)
	}
}
