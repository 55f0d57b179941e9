package observe

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	ztmetrics "github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
)

// ambientLab is bookinfo's productpage calling reviews in ambient mode, a sidecar pod
// beside them, and the lab's ztunnel.
func ambientLab(t *testing.T) *fakeDeps {
	t.Helper()
	pp := &model.Pod{Name: "productpage-v1-1", Workload: "productpage-v1", Namespace: "default", Labels: map[string]string{"app": "productpage", model.LabelDataplaneMode: "ambient"},
		IP: netip.MustParseAddr("10.244.0.2")}
	rv := &model.Pod{Name: "reviews-v1-1", Workload: "reviews-v1", Namespace: "default", Labels: map[string]string{"app": "reviews", model.LabelDataplaneMode: "ambient"},
		IP: netip.MustParseAddr("10.244.0.3")}
	sc := &model.Pod{Name: "sleep", Namespace: "default", Labels: map[string]string{"app": "sleep"}, IP: netip.MustParseAddr("10.244.0.4"), Sidecar: model.SidecarSpec{Inject: true}}
	svc := &model.Service{Name: "reviews", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10"), Selector: map[string]string{"app": "reviews"},
		Ports: []model.ServicePort{{Name: "http", Port: 9080, TargetPort: 9080}}}
	reg := ztmetrics.New()
	src := &workload.Workload{Name: pp.Name, WorkloadName: pp.Workload, Namespace: "default", CanonicalName: "productpage", ServiceAccount: "bookinfo-productpage"}
	dst := &workload.Workload{Name: rv.Name, WorkloadName: rv.Workload, Namespace: "default", CanonicalName: "reviews", ServiceAccount: "bookinfo-reviews"}
	desc := &ztmetrics.ServiceDescription{Hostname: svc.Hostname(), Name: "reviews", Namespace: "default"}
	for range 3 { // three connections over HBONE, counted by both ztunnel sides
		reg.Open(ztmetrics.Open{Reporter: ztmetrics.Source, Source: src, Destination: dst, DestinationService: desc, SecurityPolicy: ztmetrics.MutualTLS}).Close(ztmetrics.FlagNone)
		reg.Open(ztmetrics.Open{Reporter: ztmetrics.Destination, Source: src, Destination: dst, SecurityPolicy: ztmetrics.MutualTLS}).Close(ztmetrics.FlagNone)
	}
	reg.Open(ztmetrics.Open{Reporter: ztmetrics.Source, Source: src, Destination: dst, DestinationService: desc, SecurityPolicy: ztmetrics.MutualTLS}).Close(ztmetrics.FlagConnectFailure)
	reg.Open(ztmetrics.Open{Reporter: ztmetrics.Source, Source: src}).Close(ztmetrics.FlagNone) // passthrough: no Service, no edge
	var text strings.Builder
	if err := reg.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	return &fakeDeps{
		model:          model.New([]*model.Service{svc}, []*model.Pod{pp, rv, sc}),
		ztunnel:        &model.Pod{Name: "ztunnel-x2b9q", Namespace: "istio-system", IP: netip.MustParseAddr("10.244.3.254")},
		ztunnelMetrics: text.String(),
	}
}

// TestSampleDrawsAmbientPodsAndHBONEEdges: the ambient pods show their mode, the
// ztunnel shows as a pod, and productpage's connections to reviews are an HBONE edge
// counted from ztunnel's source-reported metrics (the destination's report and the
// passthrough connection make none).
func TestSampleDrawsAmbientPodsAndHBONEEdges(t *testing.T) {
	t.Parallel()
	d := ambientLab(t)
	var p Topology
	top := p.Sample(t.Context(), d)
	modes := map[string]string{}
	var zt *api.TopologyPod
	for i, tp := range top.Pods {
		modes[tp.Key] = tp.DataplaneMode
		if tp.Ztunnel {
			zt = &top.Pods[i]
		}
	}
	if modes["productpage-v1-1"] != "ambient" || modes["reviews-v1-1"] != "ambient" || modes["sleep"] != "sidecar" {
		t.Errorf("data-plane modes = %v; want the bookinfo pods ambient, sleep sidecar", modes)
	}
	if zt == nil || zt.Key != "ztunnel-x2b9q.istio-system" || !zt.Ready || zt.Namespace != "istio-system" {
		t.Fatalf("ztunnel pod = %+v; want istio-system's ztunnel-x2b9q, ready (its metrics answered)", zt)
	}
	if len(top.Edges) != 1 {
		t.Fatalf("edges = %+v; want productpage -> reviews alone", top.Edges)
	}
	e := top.Edges[0]
	if e.From != "productpage-v1-1" || e.To != "reviews.default.svc.cluster.local" || e.Metric != api.EdgeMetricZtunnel ||
		e.Requests != 4 || e.Errors != 1 || !e.HBONE || !e.MTLS {
		t.Fatalf("edge = %+v; want productpage-v1-1 -> reviews, 4 connections (1 failed) over HBONE from %s", e, api.EdgeMetricZtunnel)
	}
	d.ztunnelMetrics = ""
	if top = p.Sample(t.Context(), d); len(top.Edges) != 0 || !top.Pods[len(top.Pods)-1].Ztunnel || top.Pods[len(top.Pods)-1].Ready {
		t.Fatalf("ztunnel not answering: edges %+v, last pod %+v; want no edge and the ztunnel not ready", top.Edges, top.Pods[len(top.Pods)-1])
	}
	d.ztunnel = nil
	for _, tp := range p.Sample(t.Context(), d).Pods {
		if tp.Ztunnel {
			t.Fatalf("a lab without ztunnel draws one: %+v", tp)
		}
	}
}

// TestWriteMetricsIncludesZtunnel: ztunnel's istio_tcp_* series are in the lab's
// metrics, named as Prometheus names counters, labelled with the ztunnel pod, so a
// Prometheus query over /metrics sees the ambient traffic.
func TestWriteMetricsIncludesZtunnel(t *testing.T) {
	t.Parallel()
	d := ambientLab(t)
	var b strings.Builder
	if err := WriteMetrics(t.Context(), d, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), &b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE istio_tcp_connections_opened_total counter",
		`istio_tcp_connections_opened_total{connection_security_policy="mutual_tls",`,
		`namespace="istio-system",pod="ztunnel-x2b9q",reporter="destination",`,
		`namespace="istio-system",pod="ztunnel-x2b9q",reporter="source",`,
		"# TYPE istio_tcp_sent_bytes_total counter",
		"istio_tcp_connections_failed_total{",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "# EOF") {
		t.Errorf("metrics carry ztunnel's OpenMetrics EOF: %s", out)
	}
}
