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

	"github.com/meshlab/meshlab/controlplane/model"
)

// faultAbortFilter selects the caller-reported Istio request counts a fault filter
// answered (response flag FI). Envoy's cluster stats never see such a request (it is a
// local reply, no upstream request is made), so without them an edge whose requests are
// all aborted would look healthy, or be missing.
var faultAbortFilter = url.QueryEscape(`^istiocustom\.istio_requests_total\.reporter\.source\..*\.response_flags\.([A-Z]+,)*FI[.,]`)

// faultAborts reads the pod's fault-aborted requests from its proxy's Istio metrics, by
// their destination_service label: requests and 5xx answers.
func faultAborts(ctx context.Context, d Deps, pod string) (map[string]edgeCounters, error) {
	body, err := d.AgentGet(ctx, pod, "/admin/stats/prometheus?filter="+faultAbortFilter)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseFaultAborts(body)
}

// parseFaultAborts sums istio_requests_total samples by destination_service.
func parseFaultAborts(r io.Reader) (map[string]edgeCounters, error) {
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
		if labels["reporter"] != "source" || !strings.Contains(","+labels["response_flags"]+",", ",FI,") {
			continue
		}
		n := uint64(m.GetCounter().GetValue())
		e := out[labels["destination_service"]]
		e.requests += n
		if code, err := strconv.Atoi(labels["response_code"]); err == nil && code >= 500 {
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

// addFaultAborts adds the aborted requests to the pod's edges, by Service.
func addFaultAborts(m *model.Model, ns string, edges, aborts map[string]edgeCounters) {
	for dest, a := range aborts {
		host := serviceHost(m, ns, dest)
		if host == "" {
			continue
		}
		e := edges[host]
		e.requests += a.requests
		e.errors += a.errors
		edges[host] = e
	}
}
