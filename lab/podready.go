package lab

import (
	"context"
	"errors"
	"sync"

	"github.com/meshlab/meshlab/controlplane/model"
)

// podReadiness is the PodReady condition of the lab's pods as istiod reads it for WDS: a
// pod that is not ready is Workload.status UNHEALTHY, and ztunnel does not pick it as a
// Service's endpoint. A pod is not ready from the moment its start ends in a
// *notReadyError (its proxy failed, or it was not ready in time; an ambient pod ztunnel
// did not take) until it is started again. A pod still starting counts as ready, as
// every pod did before (one push per starting pod would make a large `up` quadratic).
// It is safe for concurrent use; the zero value is ready to use.
type podReadiness struct {
	mu      sync.RWMutex
	unready map[string]bool // pod key -> not ready
}

// unhealthy is WDSOptions.Unhealthy.
func (r *podReadiness) unhealthy(p *model.Pod) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.unready[p.Key()]
}

// set records whether pod key is ready and reports whether that changed.
func (r *podReadiness) set(key string, ready bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unready[key] == !ready {
		return false
	}
	if ready {
		delete(r.unready, key)
		return true
	}
	if r.unready == nil {
		r.unready = map[string]bool{}
	}
	r.unready[key] = true
	return true
}

// notePodStarted records how pod p's start ended (err from startPod) and, when its
// readiness changed, queues a push so that ztunnels get its Workload's new status.
func notePodStarted(l *Lab, p *model.Pod, err error) {
	var nr *notReadyError
	ready := err == nil
	if err != nil && !errors.As(err, &nr) {
		return // the pod was not made: it has no address to be an endpoint at
	}
	if !l.readiness.set(p.Key(), ready) || l.disc == nil {
		return
	}
	// The model is the same; its WDS is not (discovery builds WDS afresh and pushes the
	// Workloads whose status moved).
	l.mu.Lock()
	m := l.model
	l.push.Store("pod readiness", func(ctx context.Context, trigger string) error { return l.updateProxies(ctx, m, trigger) })
	l.mu.Unlock()
}
