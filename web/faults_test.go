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

// fakeFaults accepts hold-push on backend-v1 once and knows nothing else.
type fakeFaults struct{ active []api.Fault }

func (f *fakeFaults) AddFault(_ context.Context, spec api.FaultSpec) (api.Fault, error) {
	switch {
	case spec.Kind != api.FaultHoldPush:
		return api.Fault{}, fmt.Errorf("%w: unknown kind %q", api.ErrBadFault, spec.Kind)
	case len(spec.Pods) != 1 || spec.Pods[0] != "backend-v1":
		return api.Fault{}, fmt.Errorf("pod %q: %w (pods with a sidecar: backend-v1)", spec.Pods, api.ErrUnknownPod)
	case len(f.active) > 0:
		return api.Fault{}, fmt.Errorf("%w: f1", api.ErrFaultExists)
	}
	fl := api.Fault{ID: "f1", FaultSpec: spec, Started: time.Unix(1, 0)}
	f.active = append(f.active, fl)
	return fl, nil
}

func (f *fakeFaults) Faults() []api.Fault { return append([]api.Fault{}, f.active...) }

func (f *fakeFaults) ClearFaults(_ context.Context, id string) ([]api.Fault, error) {
	if id != "" && (len(f.active) == 0 || f.active[0].ID != id) {
		return nil, fmt.Errorf("%w %q", api.ErrUnknownFault, id)
	}
	out := f.active
	f.active = nil
	return out, nil
}

// fakeHistory keeps v1 and v2 of backend-v1.
type fakeHistory struct{}

func (fakeHistory) PodHistory(pod string) (api.PodHistory, error) {
	if pod != "backend-v1" {
		return api.PodHistory{}, api.ErrUnknownPod
	}
	return api.PodHistory{Pod: pod, Snapshots: []api.HistorySnapshot{{Version: "v1", Trigger: "start"}, {Version: "v2", Trigger: "apply"}}}, nil
}

func (fakeHistory) PodDiff(pod, from, to string) (api.ConfigDiff, error) {
	if from != "v1" || to != "v2" {
		return api.ConfigDiff{}, fmt.Errorf("%w %q", api.ErrUnknownVersion, from)
	}
	return api.ConfigDiff{Pod: pod, From: from, To: to, Types: []api.ConfigTypeDiff{{Type: "RDS", Changed: []api.ConfigResourceChange{{
		Name: "8080", Fields: []api.ConfigFieldChange{{Path: "virtual_hosts[b].routes[0].route.timeout", Old: `"0s"`, New: `"3s"`}},
	}}}}}, nil
}

func TestFaultAndHistoryRoutes(t *testing.T) {
	t.Parallel()
	fb := &fakeFaults{}
	c := serveUnix(t, FaultRoutes(fb), HistoryRoutes(fakeHistory{}))
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		spec  api.FaultSpec
		want  string
		class error
	}{
		{"unknown kind", api.FaultSpec{Kind: "explode"}, `unknown kind "explode"`, api.ErrInvalid},
		{"unknown pod", api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"nope"}}, "pods with a sidecar: backend-v1", api.ErrNotFound},
	} {
		if _, err := c.AddFault(ctx, tc.spec); !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: AddFault error %v, want %q", tc.name, err, tc.want)
		}
	}
	f, err := c.AddFault(ctx, api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"backend-v1"}})
	if err != nil || f.ID != "f1" || f.Pods[0] != "backend-v1" {
		t.Fatalf("AddFault = %+v, %v", f, err)
	}
	if _, err := c.AddFault(ctx, api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"backend-v1"}}); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "already active") {
		t.Errorf("second fault: %v, want already active", err)
	}
	if fs, err := c.Faults(ctx); err != nil || len(fs) != 1 || fs[0].Kind != api.FaultHoldPush {
		t.Errorf("Faults = %+v, %v", fs, err)
	}
	if _, err := c.ClearFaults(ctx, "f9"); !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "unknown fault") {
		t.Errorf("clear unknown: %v", err)
	}
	if fs, err := c.ClearFaults(ctx, ""); err != nil || len(fs) != 1 {
		t.Errorf("clear all = %+v, %v", fs, err)
	}

	h, err := c.PodHistory(ctx, "backend-v1")
	if err != nil || len(h.Snapshots) != 2 || h.Snapshots[1].Trigger != "apply" {
		t.Errorf("PodHistory = %+v, %v", h, err)
	}
	if _, err := c.PodHistory(ctx, "nope"); err == nil {
		t.Error("history of an unknown pod succeeded")
	}
	d, err := c.PodDiff(ctx, "backend-v1", "v1", "v2")
	if err != nil || len(d.Types) != 1 || d.Types[0].Changed[0].Fields[0].New != `"3s"` {
		t.Errorf("PodDiff = %+v, %v", d, err)
	}
	if _, err := c.PodDiff(ctx, "backend-v1", "v0", "v2"); !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "unknown config version") {
		t.Errorf("diff of an unknown version: %v", err)
	}
}
