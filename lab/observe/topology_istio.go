package observe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
)

// istioRequestsFilter selects the caller-reported Istio request counts
// (istio_requests_total{reporter="source"}). Where a caller has them, its edges are
// counted from them as Istio's docs query the mesh:
//
//	sum by (source_workload, destination_service) (rate(istio_requests_total{reporter="source"}[1m]))
//
// and the 5xx share by response_code=~"5.."; they include what Envoy's cluster stats never
// see, such as the requests a fault filter aborted (no upstream request is made).
var istioRequestsFilter = url.QueryEscape(`^istiocustom\.istio_requests_total\.reporter\.source\.`)

// istioRequests reads the pod's source-reported Istio request counts from its proxy,
// by their destination_service label: requests and 5xx answers.
func istioRequests(ctx context.Context, d Deps, pod string) (map[string]edgeCounters, error) {
	body, err := d.AgentGet(ctx, pod, "/admin/stats/prometheus?filter="+istioRequestsFilter)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseIstioRequests(body)
}

// parseIstioRequests sums istio_requests_total{reporter="source"} samples by
// destination_service; a response_code of 500-599 counts as an error.
func parseIstioRequests(r io.Reader) (map[string]edgeCounters, error) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse istio_requests_total: %w", err)
	}
	out := map[string]edgeCounters{}
	f := fams["istio_requests_total"]
	if f == nil {
		return out, nil
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["reporter"] != "source" {
			continue
		}
		n := uint64(m.GetCounter().GetValue())
		e := out[labels["destination_service"]]
		e.requests += n
		if code, err := strconv.Atoi(labels["response_code"]); err == nil && code >= 500 && code <= 599 {
			e.errors += n
		}
		out[labels["destination_service"]] = e
	}
	return out, nil
}

// serviceHost names the Service a destination_service label means, as seen from a pod
// in namespace ns: a hostname as is, or the request's authority ("reviews:9080",
// "reviews.shop") completed as the pod's resolver would; "" when no Service matches.
func serviceHost(m *model.Model, ns, dest string) string {
	host := dest
	if h, _, err := net.SplitHostPort(dest); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, c := range []string{host, host + "." + ns + ".svc." + model.DefaultClusterDomain, host + ".svc." + model.DefaultClusterDomain, host + "." + model.DefaultClusterDomain} {
		for _, s := range m.Services {
			if s.Hostname() == c {
				return c
			}
		}
	}
	return ""
}

// useIstioRequests counts the pod's edges from its Istio metrics (by Service, every
// destination_service naming it summed) wherever it has some for the Service; the
// cluster stats keep the edge's TLS and 403 counters. An edge only the Istio metrics
// saw (every request aborted by a fault) appears. Labels naming no Service
// (PassthroughCluster, "unknown", an external host) make no edge.
func useIstioRequests(m *model.Model, ns string, edges, istio map[string]edgeCounters) {
	byHost := map[string]edgeCounters{}
	for dest, c := range istio {
		host := serviceHost(m, ns, dest)
		if host == "" {
			continue
		}
		e := byHost[host]
		e.requests += c.requests
		e.errors += c.errors
		byHost[host] = e
	}
	for host, c := range byHost {
		if c.requests == 0 {
			continue
		}
		e := edges[host]
		e.requests, e.errors, e.istio = c.requests, c.errors, true
		edges[host] = e
	}
}

// gatewayRequests sums a gateway's HTTP listeners' downstream requests and 5xx answers
// (http.outbound_<address>_<port>.downstream_rq_total and _5xx).
func gatewayRequests(stats map[string]uint64) (requests, errors uint64) {
	for name, v := range stats {
		rest, ok := strings.CutPrefix(name, "http.outbound_")
		if !ok {
			continue
		}
		switch {
		case strings.HasSuffix(rest, ".downstream_rq_total"):
			requests += v
		case strings.HasSuffix(rest, ".downstream_rq_5xx"):
			errors += v
		}
	}
	return requests, errors
}

// hostEdges are the requests that entered each gateway service from the host: what its
// gateway pods received less what the mesh's pods sent it. `meshlab port-forward` dials
// from the lab's node namespace, outside every pod, so no sidecar counts its requests.
// Keyed by the gateway service's hostname.
func hostEdges(m *model.Model, samples []podSample) map[string]edgeCounters {
	out := map[string]edgeCounters{}
	for _, s := range m.Services {
		var in, mesh edgeCounters
		gateway := false
		for i, p := range m.Pods {
			if p.Router && p.Namespace == s.Namespace && s.Selects(p.Labels) {
				gateway = true
				in.requests += samples[i].gatewayRequests
				in.errors += samples[i].gatewayErrors
			}
			if c, ok := samples[i].edges[s.Hostname()]; ok && !c.ztunnel { // connections, not requests
				mesh.requests += c.requests
				mesh.errors += c.errors
			}
		}
		if !gateway || in.requests <= mesh.requests {
			continue
		}
		out[s.Hostname()] = edgeCounters{requests: in.requests - mesh.requests, errors: in.errors - min(mesh.errors, in.errors)}
	}
	return out
}

// edgeMetric names what an edge's counters were read from.
func (c edgeCounters) metric() string {
	if c.ztunnel {
		return api.EdgeMetricZtunnel
	}
	if c.istio {
		return api.EdgeMetricIstio
	}
	return api.EdgeMetricCluster
}
