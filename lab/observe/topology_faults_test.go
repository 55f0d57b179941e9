package observe

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// abortsText is what a client's sidecar printed for /stats/prometheus?filter=<faultAbortFilter>
// after a 50 % abort on good (trimmed to the labels read), plus a series the filter would
// not pass, to show the parser checks the flags itself.
const abortsText = `# TYPE istio_requests_total counter
istio_requests_total{reporter="source",source_workload="client",destination_service="good:8080",destination_service_name="good:8080",request_protocol="http",response_code="503",response_flags="FI",connection_security_policy="unknown"} 12
istio_requests_total{reporter="source",source_workload="client",destination_service="reviews.shop.svc.cluster.local",response_code="418",response_flags="DI,FI"} 2
istio_requests_total{reporter="source",source_workload="client",destination_service="good.default.svc.cluster.local",response_code="200",response_flags="-"} 9
istio_requests_total{reporter="destination",source_workload="client",destination_service="good.default.svc.cluster.local",response_code="503",response_flags="FI"} 5
`

// TestFaultAbortsOnEdges adds the requests a fault filter aborted, which the cluster
// stats never count, to the caller's edges, resolving the request's authority to the
// Service as the pod's resolver would.
func TestFaultAbortsOnEdges(t *testing.T) {
	aborts, err := parseFaultAborts(strings.NewReader(abortsText))
	if err != nil {
		t.Fatal(err)
	}
	if a := aborts["good:8080"]; a.requests != 12 || a.errors != 12 {
		t.Errorf("good:8080 aborts = %+v, want 12 requests, 12 5xx", a)
	}
	if a := aborts["reviews.shop.svc.cluster.local"]; a.requests != 2 || a.errors != 0 {
		t.Errorf("reviews aborts = %+v, want 2 requests, no 5xx (418)", a)
	}
	if len(aborts) != 2 {
		t.Errorf("aborts = %+v: counted a series without FI or not reported by the source", aborts)
	}

	svc := func(name string) *model.Service {
		return &model.Service{Name: name, Namespace: "default", Selector: map[string]string{"app": name}, Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080}}}
	}
	m := model.New([]*model.Service{svc("backend"), svc("frontend")}, nil)
	edges := map[string]edgeCounters{"backend.default.svc.cluster.local": {requests: 4, errors: 1}}
	addFaultAborts(m, "default", edges, map[string]edgeCounters{
		"backend:8080":     {requests: 6, errors: 6},
		"frontend.default": {requests: 1, errors: 1},
		"elsewhere:80":     {requests: 3, errors: 3},
	})
	if e := edges["backend.default.svc.cluster.local"]; e.requests != 10 || e.errors != 7 {
		t.Errorf("backend edge = %+v, want 10 requests, 7 5xx", e)
	}
	if e := edges["frontend.default.svc.cluster.local"]; e.requests != 1 || e.errors != 1 {
		t.Errorf("frontend edge = %+v: an edge made only of aborts must appear", e)
	}
	if len(edges) != 2 {
		t.Errorf("edges = %+v: an authority that names no Service made an edge", edges)
	}
	for dest, want := range map[string]string{
		"backend": "backend.default.svc.cluster.local", "backend.default.svc.cluster.local.": "backend.default.svc.cluster.local",
		"backend.default.svc:8080": "backend.default.svc.cluster.local", "backend.other": "",
	} {
		if got := serviceHost(m, "default", dest); got != want {
			t.Errorf("serviceHost(%q) = %q, want %q", dest, got, want)
		}
	}
}
