package observe

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
)

// istioText is what a client's sidecar printed for /stats/prometheus?filter=<istioRequestsFilter>
// (trimmed to the labels read), plus a destination-reported series the filter would not
// pass, to show the parser checks the reporter itself.
const istioText = `# TYPE istio_requests_total counter
istio_requests_total{reporter="source",source_workload="client",destination_service="good:8080",destination_service_name="good:8080",request_protocol="http",response_code="503",response_flags="FI",connection_security_policy="unknown"} 12
istio_requests_total{reporter="source",source_workload="client",destination_service="reviews.shop.svc.cluster.local",response_code="418",response_flags="DI,FI"} 2
istio_requests_total{reporter="source",source_workload="client",destination_service="good.default.svc.cluster.local",response_code="200",response_flags="-"} 9
istio_requests_total{reporter="source",source_workload="client",destination_service="good.default.svc.cluster.local",response_code="504",response_flags="UT"} 1
istio_requests_total{reporter="destination",source_workload="client",destination_service="good.default.svc.cluster.local",response_code="503",response_flags="FI"} 5
`

// TestIstioRequestsOnEdges maps istio_requests_total{reporter="source"} to the caller's
// edges as Istio's docs query it (sum by destination_service, 5xx by response_code),
// resolving the request's authority to the Service as the pod's resolver would.
func TestIstioRequestsOnEdges(t *testing.T) {
	istio, err := parseIstioRequests(strings.NewReader(istioText))
	if err != nil {
		t.Fatal(err)
	}
	if a := istio["good:8080"]; a.requests != 12 || a.errors != 12 {
		t.Errorf("good:8080 = %+v, want 12 requests, 12 5xx", a)
	}
	if a := istio["reviews.shop.svc.cluster.local"]; a.requests != 2 || a.errors != 0 {
		t.Errorf("reviews = %+v, want 2 requests, no 5xx (418)", a)
	}
	if a := istio["good.default.svc.cluster.local"]; a.requests != 10 || a.errors != 1 {
		t.Errorf("good = %+v, want 10 source-reported requests, 1 5xx (504); the destination's series is not the caller's", a)
	}
	if _, err := parseIstioRequests(strings.NewReader("istio_requests_total{reporter=source} 1\n")); err == nil || !strings.Contains(err.Error(), "istio_requests_total") {
		t.Errorf("bad exposition text: err = %v, want a parse error naming istio_requests_total", err)
	}

	svc := func(name string) *model.Service {
		return &model.Service{Name: name, Namespace: "default", Selector: map[string]string{"app": name}, Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080}}}
	}
	m := model.New([]*model.Service{svc("backend"), svc("frontend"), svc("idle")}, nil)
	edges := map[string]edgeCounters{
		"backend.default.svc.cluster.local": {requests: 7, errors: 1, handshakes: 2}, // retries counted per attempt
		"idle.default.svc.cluster.local":    {requests: 3, errors: 0},
	}
	useIstioRequests(m, "default", edges, map[string]edgeCounters{
		"backend:8080":                      {requests: 6, errors: 6},
		"backend.default.svc.cluster.local": {requests: 4, errors: 0},
		"frontend.default":                  {requests: 1, errors: 1},
		"elsewhere:80":                      {requests: 3, errors: 3},
		"idle:8080":                         {},
	})
	if e := edges["backend.default.svc.cluster.local"]; e.requests != 10 || e.errors != 6 || !e.istio || e.handshakes != 2 || e.metric() != api.EdgeMetricIstio {
		t.Errorf("backend edge = %+v, want Istio's 10 requests, 6 5xx, the cluster's 2 handshakes kept", e)
	}
	if e := edges["frontend.default.svc.cluster.local"]; e.requests != 1 || e.errors != 1 || !e.istio {
		t.Errorf("frontend edge = %+v: an edge only Istio's metrics saw (aborted) must appear", e)
	}
	if e := edges["idle.default.svc.cluster.local"]; e.requests != 3 || e.istio || e.metric() != api.EdgeMetricCluster {
		t.Errorf("idle edge = %+v: with no Istio requests the cluster stats must stay", e)
	}
	if len(edges) != 3 {
		t.Errorf("edges = %+v: an authority that names no Service made an edge", edges)
	}
	for dest, want := range map[string]string{
		"backend": "backend.default.svc.cluster.local", "backend.default.svc.cluster.local.": "backend.default.svc.cluster.local",
		"backend.default.svc:8080": "backend.default.svc.cluster.local", "backend.other": "", "unknown": "",
	} {
		if got := serviceHost(m, "default", dest); got != want {
			t.Errorf("serviceHost(%q) = %q, want %q", dest, got, want)
		}
	}
}

// gatewayLab is bookinfo's entry: the ingress gateway (a router pod in istio-system),
// productpage, and a sidecar pod "tester" that also calls the gateway.
func gatewayLab() *model.Model {
	gw := &model.Pod{Name: "istio-ingressgateway-0", Namespace: "istio-system", Labels: model.GatewayLabels(model.IngressGatewayName),
		IP: netip.MustParseAddr("10.244.0.9"), Sidecar: model.SidecarSpec{Inject: true}, Router: true}
	pp := &model.Pod{Name: "productpage-v1", Namespace: "default", Labels: map[string]string{"app": "productpage"}, IP: netip.MustParseAddr("10.244.0.2"), Sidecar: model.SidecarSpec{Inject: true}}
	tester := &model.Pod{Name: "tester", Namespace: "default", Labels: map[string]string{"app": "tester"}, IP: netip.MustParseAddr("10.244.0.3"), Sidecar: model.SidecarSpec{Inject: true}}
	port := []model.ServicePort{{Name: "http2", Port: 80, TargetPort: 8080}}
	return model.New([]*model.Service{
		{Name: model.IngressGatewayName, Namespace: "istio-system", Selector: model.GatewayLabels(model.IngressGatewayName), Ports: port},
		{Name: "productpage", Namespace: "default", Selector: map[string]string{"app": "productpage"}, Ports: port},
	}, []*model.Pod{gw, pp, tester})
}

// TestGatewayAndHostEdges samples a lab with an ingress gateway: the gateway pod and its
// service are marked, the gateway's own Istio metrics make its edge to productpage, and
// the requests it received that no sidecar sent (port-forward's, from the host) make an
// edge from api.HostNode to the gateway service, with rates.
func TestGatewayAndHostEdges(t *testing.T) {
	const gwHost, ppHost = "istio-ingressgateway.istio-system.svc.cluster.local", "productpage.default.svc.cluster.local"
	stats := func(gwTotal, gw5xx, testerSent uint64) map[string]map[string]uint64 {
		return map[string]map[string]uint64{
			"istio-ingressgateway-0.istio-system": { // the pod's key
				"http.outbound_0.0.0.0_8080.downstream_rq_total":          gwTotal,
				"http.outbound_0.0.0.0_8080.downstream_rq_5xx":            gw5xx,
				"cluster.outbound|9080||" + ppHost + ".upstream_rq_total": gwTotal,
			},
			"tester": {"cluster.outbound|80||" + gwHost + ".upstream_rq_total": testerSent},
		}
	}
	d := &fakeDeps{model: gatewayLab(), stats: stats(25, 5, 5), get: map[string]string{
		"istio-ingressgateway-0.istio-system /admin/stats/prometheus?filter=" + istioRequestsFilter: `# TYPE istio_requests_total counter
istio_requests_total{reporter="source",source_workload="istio-ingressgateway",destination_service="productpage.default.svc.cluster.local",response_code="200"} 20
istio_requests_total{reporter="source",source_workload="istio-ingressgateway",destination_service="productpage.default.svc.cluster.local",response_code="503"} 5
`}}
	var p Topology
	top := p.Sample(t.Context(), d)
	gwPod, gwSvc := false, false
	for _, pod := range top.Pods {
		if pod.Gateway != (pod.Name == "istio-ingressgateway-0") {
			t.Errorf("pod %s: gateway = %v", pod.Name, pod.Gateway)
		}
		gwPod = gwPod || pod.Gateway
	}
	for _, s := range top.Services {
		if s.Gateway != (s.Hostname == gwHost) {
			t.Errorf("service %s: gateway = %v", s.Hostname, s.Gateway)
		}
		gwSvc = gwSvc || s.Gateway
	}
	if !gwPod || !gwSvc {
		t.Fatalf("no gateway pod or service in %+v", top)
	}
	got := map[string]api.TopologyEdge{}
	for _, e := range top.Edges {
		got[e.From+" -> "+e.To] = e
	}
	if e, ok := got["istio-ingressgateway-0.istio-system -> "+ppHost]; !ok || e.Requests != 25 || e.Errors != 5 || e.Metric != api.EdgeMetricIstio {
		t.Errorf("gateway -> productpage = %+v (found %v); want 25 requests, 5 5xx from istio_requests_total", e, ok)
	}
	if e, ok := got[api.HostNode+" -> "+gwHost]; !ok || e.Requests != 20 || e.Errors != 5 || e.Metric != api.EdgeMetricGateway {
		t.Errorf("host -> gateway = %+v (found %v); want the 25 received less tester's 5, 5 5xx", e, ok)
	}
	if e, ok := got["tester -> "+gwHost]; !ok || e.Requests != 5 {
		t.Errorf("tester -> gateway = %+v (found %v); want 5", e, ok)
	}
	if len(got) != 3 {
		t.Errorf("edges = %v; want exactly the three above", got)
	}

	// A second sample: 10 more requests from the host, none from tester, gives the host
	// edge a rate; with no traffic from outside the mesh there is no host edge at all.
	d.stats = stats(35, 5, 5)
	d.get = nil
	top = p.Sample(t.Context(), d)
	var host *api.TopologyEdge
	for i := range top.Edges {
		if top.Edges[i].From == api.HostNode {
			host = &top.Edges[i]
		}
	}
	if host == nil || host.Requests != 30 || host.RPS <= 0 {
		t.Errorf("second sample: host edge = %+v; want 30 requests and a rate", host)
	}
	samples := make([]podSample, len(d.model.Pods))
	for i, pod := range d.model.Pods {
		switch pod.Name {
		case "istio-ingressgateway-0":
			samples[i] = podSample{gatewayRequests: 5}
		case "tester":
			samples[i] = podSample{edges: map[string]edgeCounters{gwHost: {requests: 5}}}
		}
	}
	if e := hostEdges(d.model, samples); len(e) != 0 {
		t.Errorf("every request the gateway got came from tester, yet host edges = %+v", e)
	}
	samples[slices.IndexFunc(d.model.Pods, func(p *model.Pod) bool { return p.Router })].gatewayRequests = 8
	if e := hostEdges(d.model, samples); e[gwHost].requests != 3 {
		t.Errorf("8 received, 5 from tester: host edges = %+v, want 3 requests", e)
	}
}
