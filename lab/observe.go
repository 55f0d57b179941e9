package lab

import (
	"context"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab/observe"
	"github.com/meshlab/meshlab/web"
)

// The lab's observation API is lab/observe's, given the lab through below (deps.go).
var (
	_ web.TopologySource = (*Lab)(nil)
	_ web.TrafficSender  = (*Lab)(nil)
)

// topoPoller is the lab's topology poll (Lab.topo), stopped with the lab's servers.
type topoPoller = observe.Topology

// WatchTopology implements web.TopologySource: while ctx lasts, a topology a second,
// polled while the lab's servers run.
func (l *Lab) WatchTopology(ctx context.Context) <-chan api.Topology {
	return l.topo.Watch(ctx, l.serverCtx, l.below())
}

// Topology implements web.TopologySource: one fresh sample.
func (l *Lab) Topology(ctx context.Context) (api.Topology, error) {
	return l.topo.Sample(ctx, l.below()), nil
}

// SendTraffic implements web.TrafficSender from inside the pod's namespace.
func (l *Lab) SendTraffic(ctx context.Context, r api.TrafficRequest) (api.TrafficResult, error) {
	return observe.SendTraffic(ctx, l.below(), r)
}
