package trace

import (
	"context"
	"strings"

	"github.com/meshlab/meshlab/dataplane/statstext"
)

// proxyCounters reads a proxy's counters and gauges (Envoy's text /stats) through its
// agent; histograms are left out.
func proxyCounters(ctx context.Context, d Deps, pod string) (map[string]uint64, error) {
	body, err := d.AgentGet(ctx, pod, "/admin/stats")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return statstext.ParseValues(body)
}

// statDeltas returns the counters that rose from before to after, by how much.
func statDeltas(before, after map[string]uint64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if b := before[k]; v > b && !strings.HasPrefix(k, "server.") && !strings.HasPrefix(k, "cluster.xds-grpc") {
			out[k] = int64(v - b)
		}
	}
	return out
}
