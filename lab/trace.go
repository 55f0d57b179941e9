package lab

import (
	"context"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab/trace"
	"github.com/meshlab/meshlab/web"
)

var _ web.Tracer = (*Lab)(nil)

// Trace implements web.Tracer (lab/trace): one request from the pod, explained.
func (l *Lab) Trace(ctx context.Context, r api.TraceRequest) (api.TraceResult, error) {
	return trace.Trace(ctx, l.below(), r)
}
