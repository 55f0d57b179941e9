package lab

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
)

func topologyPod(mutate func(*model.Pod)) *model.Pod {
	p := &model.Pod{Name: "backend-v1", Namespace: "default", IP: netip.MustParseAddr("10.244.0.2"),
		Labels: map[string]string{"app": "backend"}, Sidecar: model.SidecarSpec{Inject: true}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// A running lab takes a change of a sidecar's proxy settings (a new epoch) or of labels
// in place, but replaces a pod when what needs new processes changes: injection, the
// hold, the app.
func TestPlanPodsReplacesOnlyForNewProcesses(t *testing.T) {
	cur := model.New(nil, []*model.Pod{topologyPod(nil)})
	for _, tc := range []struct {
		name    string
		mutate  func(*model.Pod)
		inPlace bool
	}{
		{name: "labels", mutate: func(p *model.Pod) { p.Labels = map[string]string{"app": "x"} }, inPlace: true},
		{name: "proxy settings", inPlace: true, mutate: func(p *model.Pod) {
			p.Sidecar.LogLevel, p.Sidecar.Concurrency, p.Sidecar.DataPlane = "debug", 4, "meshlab"
			p.Sidecar.DrainDuration, p.Sidecar.ParentShutdownDuration = time.Second, 2*time.Second
			p.Sidecar.ProxyPath, p.Sidecar.BootstrapOverride = "/opt/envoy", `{"stats_flush_interval":"7s"}`
		}},
		{name: "hold", mutate: func(p *model.Pod) { p.Sidecar.HoldApplicationUntilProxyStarts = true }},
		{name: "inject", mutate: func(p *model.Pod) { p.Sidecar.Inject = false }},
		{name: "app", mutate: func(p *model.Pod) { p.App.StartupCalls = []string{"http://x/"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planPods(cur, model.New(nil, []*model.Pod{topologyPod(tc.mutate)}))
			replaced := len(plan.remove) == 1 && len(plan.add) == 1 && plan.remove[0].Name == "backend-v1" && plan.add[0].Name == "backend-v1"
			if tc.inPlace && !plan.empty() || !tc.inPlace && !replaced {
				t.Errorf("planPods: remove %v, add %v; want in place: %t", podNames(plan.remove), podNames(plan.add), tc.inPlace)
			}
		})
	}
}

func TestUpSummary(t *testing.T) {
	if got := upSummary("x", 3, nil, 312*time.Millisecond); got != "lab x is up: 3 pods ready in 312ms" {
		t.Errorf("summary = %q", got)
	}
	failed := []podFailure{{Pod: "a", Err: errors.New("boom")}, {Pod: "b", Err: errors.New("bang")}}
	want := "lab x is up: 1 of 3 pods ready in 1.2s; failed: a, b (meshlab describe pod a)"
	if got := upSummary("x", 3, failed, 1200*time.Millisecond); got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}

func TestFailureReason(t *testing.T) {
	msg := "not ready: no proxy running\nlast unexpected proxy exit: proxy cannot be started: start proxy epoch 0: fork/exec /x: no such file\nstart proxy epoch 0: fork/exec /x: no such file"
	if got, want := failureReason(msg), "proxy cannot be started: start proxy epoch 0: fork/exec /x: no such file"; got != want {
		t.Errorf("failureReason = %q, want %q", got, want)
	}
	long := "last unexpected proxy exit: exited 11 times\nexit status 1\na\nb\nc\nd"
	if got := failureReason(long); got != "exited 11 times\n...\nb\nc\nd" {
		t.Errorf("failureReason = %q, want the first line, ... and the last 3", got)
	}
}
