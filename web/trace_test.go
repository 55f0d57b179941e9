package web

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// fakeTracer traces frontend-v1 to backend:8080 only.
type fakeTracer struct{}

func (fakeTracer) Trace(_ context.Context, r api.TraceRequest) (api.TraceResult, error) {
	switch {
	case r.Pod != "frontend-v1":
		return api.TraceResult{}, fmt.Errorf("pod %q: %w (pods: frontend-v1)", r.Pod, api.ErrUnknownPod)
	case r.Target != "backend:8080":
		return api.TraceResult{}, fmt.Errorf("%w: target %q does not resolve", api.ErrBadTraffic, r.Target)
	}
	return api.TraceResult{Pod: r.Pod, Status: 200, Hops: []api.TraceHop{{Kind: api.HopApp, Pod: "backend-v1", Status: 200}}}, nil
}

func TestTraceRoutes(t *testing.T) {
	t.Parallel()
	c := serveUnix(t, TraceRoutes(fakeTracer{}))

	res, err := c.Trace(t.Context(), api.TraceRequest{Pod: "frontend-v1", Target: "backend:8080"})
	if err != nil || res.Status != 200 || len(res.Hops) != 1 || res.Hops[0].Pod != "backend-v1" {
		t.Fatalf("Trace = %+v, %v", res, err)
	}
	for _, tc := range []struct {
		name string
		req  api.TraceRequest
		want string
	}{
		{"no pod", api.TraceRequest{Target: "backend:8080"}, "pod: required"},
		{"no target", api.TraceRequest{Pod: "frontend-v1"}, "target: required"},
		{"unknown pod", api.TraceRequest{Pod: "nope", Target: "backend:8080"}, "pods: frontend-v1"},
		{"unresolvable", api.TraceRequest{Pod: "frontend-v1", Target: "nowhere:1"}, "does not resolve"},
	} {
		if _, err := c.Trace(t.Context(), tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v; want it to contain %q", tc.name, err, tc.want)
		}
	}
}
