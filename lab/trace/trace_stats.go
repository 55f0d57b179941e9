package trace

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"strings"
)

// proxyCounters reads a proxy's integer stats (Envoy's /stats text, "name: value")
// through its agent; histograms and other non-integer values are skipped.
func proxyCounters(ctx context.Context, d Deps, pod string) (map[string]int64, error) {
	body, err := d.AgentGet(ctx, pod, "/admin/stats")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseStats(body)
}

// parseStats parses Envoy's /stats text format.
func parseStats(r io.Reader) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64); err == nil {
			out[name] = n
		}
	}
	return out, sc.Err()
}

// statDeltas returns the counters that rose from before to after, by how much.
func statDeltas(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && !strings.HasPrefix(k, "server.") && !strings.HasPrefix(k, "cluster.xds-grpc") {
			out[k] = d
		}
	}
	return out
}
