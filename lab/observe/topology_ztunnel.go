package observe

import (
	"cmp"
	"context"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
)

// The ambient pods' edges come from the node's ztunnel, which carries their connections:
// its istio_tcp_connections_opened_total{reporter="source"} by source workload and
// destination_service, as Istio's dashboards (and Kiali) draw ambient traffic. ztunnel
// labels a connection with its source's workload (WDS workload_name, the Deployment's
// name for its pods), not the pod: an ambient workload of several pods has its edges
// drawn from its first pod by name. A destination that is no Service (a pod address
// called directly, "unknown") makes no edge, as for the sidecars.

// ztunnelSample is what one poll read from the ztunnel: the ambient pods' edges by pod
// key and whether its metrics answered (its readiness as the dashboard shows it).
type ztunnelSample struct {
	pod   *model.Pod
	ok    bool
	edges map[string]map[string]edgeCounters // pod key -> destination host -> counters
}

// sampleZtunnel reads the ztunnel's metrics, if the lab runs one.
func sampleZtunnel(ctx context.Context, d Deps, m *model.Model) ztunnelSample {
	z := ztunnelSample{pod: d.Ztunnel()}
	if z.pod == nil {
		return z
	}
	fams, err := ztunnelMetrics(ctx, d)
	if err != nil {
		return z
	}
	z.ok = true
	z.edges = ztunnelEdges(m, fams)
	return z
}

// ztunnelEdges sums the source-reported connections of every ambient pod's workload by
// destination Service: opened (requests), failed (errors), and whether any went over
// HBONE (mutual_tls).
func ztunnelEdges(m *model.Model, fams map[string]*dto.MetricFamily) map[string]map[string]edgeCounters {
	type workloadKey struct{ ns, name string }
	first := map[workloadKey]*model.Pod{}
	for _, p := range m.Pods { // m.Pods is sorted: the first pod by name wins
		if model.DataplaneMode(m, p) != model.DataplaneAmbient {
			continue
		}
		k := workloadKey{p.Namespace, cmp.Or(p.Workload, p.Name)}
		if first[k] == nil || p.Name < first[k].Name {
			first[k] = p
		}
	}
	out := map[string]map[string]edgeCounters{}
	add := func(family string, f func(*edgeCounters, uint64, map[string]string)) {
		for _, s := range fams[family].GetMetric() {
			l := labelMap(s)
			if l["reporter"] != "source" {
				continue
			}
			p := first[workloadKey{l["source_workload_namespace"], l["source_workload"]}]
			host := l["destination_service"]
			if p == nil || host == "" || host == "unknown" || !slices.ContainsFunc(m.Services, func(s *model.Service) bool { return s.Hostname() == host }) {
				continue
			}
			if out[p.Key()] == nil {
				out[p.Key()] = map[string]edgeCounters{}
			}
			e := out[p.Key()][host]
			e.ztunnel = true
			f(&e, uint64(s.GetCounter().GetValue()), l)
			out[p.Key()][host] = e
		}
	}
	add("istio_tcp_connections_opened_total", func(e *edgeCounters, n uint64, l map[string]string) {
		e.requests += n
		if l["connection_security_policy"] == "mutual_tls" {
			e.mtlsMatches += n
		} else {
			e.rawMatches += n
		}
	})
	add("istio_tcp_connections_failed_total", func(e *edgeCounters, n uint64, _ map[string]string) { e.errors += n })
	return out
}

func labelMap(s *dto.Metric) map[string]string {
	out := make(map[string]string, len(s.GetLabel()))
	for _, l := range s.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// ztunnelTopologyPod is the ztunnel as the dashboard draws it.
func ztunnelTopologyPod(z ztunnelSample) api.TopologyPod {
	return api.TopologyPod{Name: z.pod.Name, Namespace: z.pod.Namespace, Key: z.pod.Key(), IP: z.pod.IP, Ready: z.ok, Epoch: -1,
		DataplaneMode: model.DataplaneNone.String(), Ztunnel: true}
}
