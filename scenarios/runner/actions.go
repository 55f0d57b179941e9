package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
)

// loadPause separates the rounds of a load.
const loadPause = 20 * time.Millisecond

// loadResult sums the background load's answers.
type loadResult struct {
	sent, failed int
	statuses     map[string]int
}

func (r *Runner) runActions(ctx context.Context, l *Lab, actions []Action, st *stepState) error {
	for j, a := range actions {
		if err := r.runAction(ctx, l, a, st); err != nil {
			return fmt.Errorf("action %d (%s): %w", j+1, a.Kind, err)
		}
	}
	return nil
}

func (r *Runner) runAction(ctx context.Context, l *Lab, a Action, st *stepState) error {
	switch {
	case a.Apply != nil:
		lines, err := r.Backend.Apply(ctx, []api.ConfigFile{{Name: l.File, Data: string(a.Apply.data)}})
		if err != nil {
			return err
		}
		for _, s := range lines {
			r.printf("  %s\n", s)
		}
		if a.Apply.NoWait {
			return nil
		}
		return r.waitSynced(ctx)
	case a.Delete != nil:
		refs := make([]api.ObjectRef, len(a.Delete.Objects))
		for i, o := range a.Delete.Objects {
			refs[i] = api.ObjectRef{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
		}
		lines, err := r.Backend.Delete(ctx, nil, refs)
		if err != nil {
			return err
		}
		for _, s := range lines {
			r.printf("  %s\n", s)
		}
		return r.waitSynced(ctx)
	case a.Label != nil:
		js, err := json.Marshal(labelObject(*a.Label))
		if err != nil {
			return err
		}
		lines, err := r.Backend.Apply(ctx, []api.ConfigFile{{Name: l.File, Data: string(js)}})
		if err != nil {
			return err
		}
		for _, s := range lines {
			r.printf("  %s\n", s)
		}
		return r.waitSynced(ctx)
	case a.Traffic != nil:
		t := a.Traffic
		res, err := r.Backend.SendTraffic(ctx, t.request(cmp0(t.N, 20)))
		if err != nil {
			return err
		}
		r.printf("  sent %d requests from %s to %s: %s, p50 %.1fms\n", res.Sent, t.From, t.URL, counts(res.Statuses), res.P50Ms)
		st.traffic = &res
		if st.byPod == nil {
			st.byPod = map[string]*api.TrafficResult{}
		}
		st.byPod[t.From] = &res
	case a.ControlPlaneStop != nil:
		f, err := r.Backend.AddFault(ctx, api.FaultSpec{Kind: api.FaultDiscoveryStop, Duration: a.ControlPlaneStop.Duration.D()})
		if err != nil {
			return err
		}
		r.printf("  control plane stopped for %v (%s)\n", a.ControlPlaneStop.Duration.D(), f.ID)
	case a.RotateCerts != nil || a.Kind == "rotate-certs":
		start := time.Now()
		if err := r.Backend.RotateRoot(ctx); err != nil {
			return err
		}
		r.printf("  CA root rotated in %v\n", time.Since(start).Round(time.Millisecond))
	case a.ClearFaults != nil || a.Kind == "clear-faults":
		fs, err := r.Backend.ClearFaults(ctx, "")
		if err != nil {
			return err
		}
		r.printf("  %d faults cleared\n", len(fs))
	case a.Load != nil:
		if st.loadStop != nil {
			return fmt.Errorf("one load per step")
		}
		st.load0 = a.Load
		st.loadStop = r.startLoad(ctx, *a.Load, st)
		r.printf("  load from %s to %s started\n", a.Load.From, a.Load.URL)
	case a.RestartProxy != nil:
		res, err := r.Backend.RestartProxy(ctx, a.RestartProxy.Pod, true)
		if err != nil {
			return err
		}
		if !res.Live {
			return fmt.Errorf("epoch %d of %s did not become live: %s", res.Epoch, res.Pod, res.Message)
		}
		r.printf("  %s: epoch %d live in %v\n", res.Pod, res.Epoch, res.Elapsed.Round(time.Millisecond))
	case a.KillProxy != nil:
		pod := a.KillProxy.Pod
		pid, err := r.Backend.KillProxy(ctx, pod)
		if err != nil {
			return err
		}
		r.printf("  %s: killed proxy pid %d (SIGKILL)\n", pod, pid)
		return r.poll(ctx, 30*time.Second, func() (bool, string) {
			np, err := livePID(ctx, r.Backend, pod)
			if err != nil {
				return false, err.Error()
			}
			return np != pid, "proxy still pid " + strconv.Itoa(pid)
		})
	case a.Wait != nil:
		w := a.Wait
		if w.Until == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(w.Duration.D()):
			}
			return nil
		}
		timeout := w.Timeout.D()
		if timeout == 0 {
			timeout = 20 * time.Second
		}
		return r.poll(ctx, timeout, func() (bool, string) {
			res := r.evaluate(ctx, l, *w.Until, st)
			return res.Passed, res.Check + ": saw " + res.Saw + "; want " + res.Want
		})
	}
	return nil
}

func cmp0(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// errGaveUp is a poll that timed out.
var errGaveUp = errors.New("gave up")

// poll calls ok until it reports true, giving up after timeout with its last reason.
func (r *Runner) poll(ctx context.Context, timeout time.Duration, ok func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, why := ok()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v: %s", errGaveUp, timeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitSynced waits until every proxy is connected and applied the last config it was
// sent, as `apply --wait` does: the lab judges each xDS stream (a proxyless gRPC client's
// closed call stream, whose types the node's merged state kept STALE, is not waited
// for), after the pushes of every change applied so far. While a discovery-stop fault
// holds the control plane down there is nothing to wait for; once it is cleared the
// proxies reconnect each at its own backoff (Envoy's: up to 30 s), and are waited for.
func (r *Runner) waitSynced(ctx context.Context) error {
	timeout := r.SyncTimeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	if slices.ContainsFunc(r.Backend.Faults(), func(f api.Fault) bool { return f.Kind == api.FaultDiscoveryStop }) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := r.Backend.WaitSynced(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return fmt.Errorf("%w after %v: %w", errGaveUp, timeout, err)
	}
	return err
}

// startLoad sends rounds of requests until the returned stop is called, which waits for
// the last round and stores the totals in st.load.
func (r *Runner) startLoad(ctx context.Context, t TrafficAction, st *stepState) func() {
	ctx, cancel := context.WithCancel(ctx)
	res := &loadResult{statuses: map[string]int{}}
	var wg sync.WaitGroup
	wg.Add(1)
	first := make(chan struct{})
	go func() {
		defer wg.Done()
		for round := 0; ctx.Err() == nil; round++ {
			switch round {
			case 0:
			case 1:
				close(first) // the load is flowing: the next actions may start
				fallthrough
			default:
				select { // a steady trickle, not a flood that starves a small machine
				case <-ctx.Done():
					continue
				case <-time.After(loadPause):
				}
			}
			tr, err := r.Backend.SendTraffic(context.WithoutCancel(ctx), t.request(cmp0(t.N, 5)))
			if err != nil {
				res.failed++
				res.statuses["error"]++
				r.Logger.Warn("load round failed", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			res.sent += tr.Sent
			for code, n := range tr.Statuses {
				res.statuses[code] += n
				if len(code) != 3 || code[0] != '2' {
					res.failed += n
				}
			}
		}
		if ctx.Err() != nil {
			select {
			case <-first:
			default:
				close(first)
			}
		}
	}()
	<-first
	return func() {
		cancel()
		wg.Wait()
		st.load = res
		st.loadStop = nil
	}
}

// labelObject is the Namespace a label action applies: the namespace with its labels.
func labelObject(a LabelAction) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": a.Namespace, "labels": a.Labels},
	}
}
