package lab

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// TestPodReadinessInWDS: a pod whose start ended not ready is UNHEALTHY in WDS until it
// starts again; a pod that could not be made at all changes nothing.
func TestPodReadinessInWDS(t *testing.T) {
	t.Parallel()
	p := &model.Pod{Name: "httpbin-broken", Namespace: "default", ServiceAccount: "default", IP: netip.MustParseAddr("10.244.0.9")}
	m := &model.Model{Pods: []*model.Pod{p}}
	l := &Lab{}
	status := func() workload.WorkloadStatus {
		t.Helper()
		for _, a := range xds.Addresses(m, xds.WDSOptions{Node: "n", Unhealthy: l.readiness.unhealthy}) {
			if w := a.GetWorkload(); w != nil && w.GetName() == p.Name {
				return w.GetStatus()
			}
		}
		t.Fatal("no workload for the pod")
		return 0
	}
	if got := status(); got != workload.WorkloadStatus_HEALTHY {
		t.Fatalf("a pod never started: %s, want HEALTHY", got)
	}
	notePodStarted(l, p, &notReadyError{err: errPodFailed, msg: "proxy failed"})
	if got := status(); got != workload.WorkloadStatus_UNHEALTHY {
		t.Errorf("a pod whose proxy failed: %s, want UNHEALTHY", got)
	}
	notePodStarted(l, p, errors.New("create namespace: exists"))
	if got := status(); got != workload.WorkloadStatus_UNHEALTHY {
		t.Errorf("after a start that made nothing: %s, want UNHEALTHY still", got)
	}
	notePodStarted(l, p, nil)
	if got := status(); got != workload.WorkloadStatus_HEALTHY {
		t.Errorf("a pod started again and ready: %s, want HEALTHY", got)
	}
}
