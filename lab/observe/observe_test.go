package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

func TestEdgesFromStats(t *testing.T) {
	got := edgesFromStats(map[string]uint64{
		"cluster.outbound|8080||backend.default.svc.cluster.local.upstream_rq_total":   7,
		"cluster.outbound|8080|v1|backend.default.svc.cluster.local.upstream_rq_total": 3,
		"cluster.outbound|8080||backend.default.svc.cluster.local.upstream_rq_5xx":     2,
		"cluster.outbound|9090||db.data.svc.cluster.local.ssl.handshake":               1,
		"cluster.inbound|8080||.upstream_rq_total":                                     99,
		"cluster.outbound|8080|backend.upstream_rq_total":                              5, // malformed
	})
	want := map[string]edgeCounters{
		"backend.default.svc.cluster.local": {requests: 10, errors: 2},
		"db.data.svc.cluster.local":         {handshakes: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("edges = %+v, want %+v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("edge %s = %+v, want %+v", k, got[k], w)
		}
	}
}

func hello() *model.Model {
	fe := &model.Pod{Name: "frontend-v1", Namespace: "default", Labels: map[string]string{"app": "frontend"}, IP: netip.MustParseAddr("10.244.0.2"), Sidecar: model.SidecarSpec{Inject: true}}
	be := &model.Pod{Name: "backend-v1", Namespace: "default", Labels: map[string]string{"app": "backend"}, IP: netip.MustParseAddr("10.244.0.3"), Sidecar: model.SidecarSpec{Inject: true}}
	svc := &model.Service{Name: "backend", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10"), Selector: map[string]string{"app": "backend"},
		Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080}}}
	return model.New([]*model.Service{svc}, []*model.Pod{fe, be})
}

func TestTopologyRates(t *testing.T) {
	m := hello() // pods sorted: backend-v1, frontend-v1
	host := "backend.default.svc.cluster.local"
	sample := func(req, errs uint64) []podSample {
		return []podSample{{}, {edges: map[string]edgeCounters{host: {requests: req, errors: errs}}}}
	}
	var p Topology
	t0 := time.Unix(1000, 0)
	first := buildTopology(m, sample(10, 0))
	p.rates(&first, sample(10, 0), m, t0)
	if len(first.Edges) != 1 || first.Edges[0].From != "frontend-v1" || first.Edges[0].To != host || first.Edges[0].RPS != 0 {
		t.Fatalf("first sample edges = %+v; want frontend-v1 -> backend with no rate yet", first.Edges)
	}
	if len(first.Services) != 1 || strings.Join(first.Services[0].Pods, ",") != "backend-v1" {
		t.Errorf("services = %+v", first.Services)
	}
	second := buildTopology(m, sample(30, 5))
	p.rates(&second, sample(30, 5), m, t0.Add(2*time.Second))
	if e := second.Edges[0]; e.RPS != 10 || e.ErrorRate != 0.25 || e.Requests != 30 {
		t.Errorf("edge = %+v; want 10 rps, 25%% errors", e)
	}
	// A proxy that restarted without its counters counts from zero, never negative.
	third := buildTopology(m, sample(4, 0))
	p.rates(&third, sample(4, 0), m, t0.Add(3*time.Second))
	if e := third.Edges[0]; e.RPS != 4 || e.ErrorRate != 0 {
		t.Errorf("after a reset, edge = %+v; want 4 rps", e)
	}
}

func TestResolveTarget(t *testing.T) {
	m := hello()
	p := m.Pod("frontend-v1")
	for in, want := range map[string]string{
		"http://backend:8080/":                        "10.96.0.10:8080",
		"http://Backend.default.svc.cluster.local./x": "10.96.0.10:80",
		"http://10.244.0.3:8080/":                     "10.244.0.3:8080",
		"http://backend.default:8080/?status=500":     "10.96.0.10:8080",
	} {
		u, _ := url.Parse(in)
		got, err := ResolveTarget(m, p, u)
		if err != nil || got.String() != want {
			t.Errorf("ResolveTarget(%s) = %v, %v; want %s", in, got, err, want)
		}
	}
	u, _ := url.Parse("http://example.com/")
	if _, err := ResolveTarget(m, p, u); err == nil {
		t.Error("a name outside the lab resolved")
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p50, p90, p99 := percentileMs(d, 50), percentileMs(d, 90), percentileMs(d, 99); p50 != 50 || p90 != 90 || p99 != 99 {
		t.Errorf("percentiles = %v %v %v; want 50 90 99", p50, p90, p99)
	}
	if percentileMs(nil, 50) != 0 || percentileMs(d[:1], 99) != 1 {
		t.Error("edge cases")
	}
}

func TestSendTrafficRefusesBadRequests(t *testing.T) {
	d := &fakeDeps{model: hello()}
	for _, r := range []api.TrafficRequest{
		{Pod: "frontend-v1", URL: "http://example.com/", N: 1},
		{Pod: "frontend-v1", URL: "ftp://backend/", N: 1},
		{Pod: "frontend-v1", URL: "http://backend/", N: 0},
	} {
		if _, err := SendTraffic(t.Context(), d, r); !errors.Is(err, api.ErrBadTraffic) {
			t.Errorf("SendTraffic(%+v) = %v; want a bad-traffic error", r, err)
		}
	}
	if _, err := SendTraffic(t.Context(), d, api.TrafficRequest{Pod: "nope", URL: "http://backend/", N: 1}); !errors.Is(err, api.ErrUnknownPod) {
		t.Errorf("unknown pod: %v", err)
	}
}

// BenchmarkTopology100Pods measures building one topology snapshot (with rates) of 20
// services of 5 pods, each pod calling the next service, from sampled stats.
func BenchmarkTopology100Pods(b *testing.B) {
	var svcs []*model.Service
	var pods []*model.Pod
	for s := range 20 {
		app := fmt.Sprintf("svc%d", s)
		svcs = append(svcs, &model.Service{Name: app, Namespace: "default", Selector: map[string]string{"app": app},
			VIP: netip.AddrFrom4([4]byte{10, 96, 0, byte(s)}), Ports: []model.ServicePort{{Port: 80, TargetPort: 80}}})
		for i := range 5 {
			pods = append(pods, &model.Pod{Name: fmt.Sprintf("%s-%d", app, i), Namespace: "default", Labels: map[string]string{"app": app},
				IP: netip.AddrFrom4([4]byte{10, 244, byte(s), byte(i + 2)}), Sidecar: model.SidecarSpec{Inject: true}})
		}
	}
	m := model.New(svcs, pods)
	samples := make([]podSample, len(m.Pods))
	for i := range samples {
		samples[i].edges = map[string]edgeCounters{fmt.Sprintf("svc%d.default.svc.cluster.local", i%20): {requests: uint64(i)}}
	}
	var p Topology
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		t := buildTopology(m, samples)
		p.rates(&t, samples, m, now.Add(time.Duration(i)*time.Second))
	}
}

// fakeDeps is a lab of the given model whose agents answer from maps and whose pods dial
// on the host; events are recorded.
type fakeDeps struct {
	model  *model.Model
	status map[string]agentapi.Status
	stats  map[string]map[string]uint64
	get    map[string]string // "pod path" -> body
	// ztunnel is the lab's ztunnel pod (nil: none) and ztunnelMetrics its
	// /stats/prometheus ("": it does not answer).
	ztunnel        *model.Pod
	ztunnelMetrics string
	mu             sync.Mutex
	events         []api.Event
}

func (f *fakeDeps) Ztunnel() *model.Pod { return f.ztunnel }

func (f *fakeDeps) ZtunnelMetrics(context.Context) (io.ReadCloser, error) {
	if f.ztunnel == nil || f.ztunnelMetrics == "" {
		return nil, errors.New("ztunnel unreachable")
	}
	return io.NopCloser(strings.NewReader(f.ztunnelMetrics)), nil
}

func (f *fakeDeps) Model() *model.Model { return f.model }

func (f *fakeDeps) DialFrom(ctx context.Context, _, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (f *fakeDeps) AgentStatus(_ context.Context, pod string) (agentapi.Status, error) {
	st, ok := f.status[pod]
	if !ok {
		return st, fmt.Errorf("pod %s: agent unreachable", pod)
	}
	return st, nil
}

func (f *fakeDeps) AgentStats(_ context.Context, pod, _ string) (map[string]uint64, error) {
	s, ok := f.stats[pod]
	if !ok {
		return nil, fmt.Errorf("pod %s: agent unreachable", pod)
	}
	return s, nil
}

func (f *fakeDeps) AgentGet(_ context.Context, pod, path string) (io.ReadCloser, error) {
	b, ok := f.get[pod+" "+path]
	if !ok {
		return nil, fmt.Errorf("GET %s: 404 Not Found", path)
	}
	return io.NopCloser(strings.NewReader(b)), nil
}

func (f *fakeDeps) Publish(kind, pod, msg string, fields map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, api.Event{Kind: kind, Pod: pod, Message: msg, Fields: fields})
}

// TestSampleThroughDeps samples a lab through Deps only: the edges come from the
// client's Istio metrics (read with AgentGet, the aborted requests included), a pod
// whose agent does not answer shows without edges, and an epoch that went live since the
// previous sample is published.
func TestSampleThroughDeps(t *testing.T) {
	const host = "backend.default.svc.cluster.local"
	live := func(epochs ...agentapi.EpochStatus) agentapi.Status {
		return agentapi.Status{Ready: true, Epochs: epochs}
	}
	d := &fakeDeps{
		model:  hello(), // backend-v1, frontend-v1
		status: map[string]agentapi.Status{"frontend-v1": live(agentapi.EpochStatus{Epoch: 0, State: agentapi.EpochLive})},
		stats: map[string]map[string]uint64{"frontend-v1": {
			"cluster.outbound|8080||" + host + ".upstream_rq_total": 6,
			"cluster.outbound|8080||" + host + ".upstream_rq_5xx":   1,
		}},
		get: map[string]string{"frontend-v1 /admin/stats/prometheus?filter=" + istioRequestsFilter: `# TYPE istio_requests_total counter
istio_requests_total{reporter="source",destination_service="backend:8080",response_code="503",response_flags="FI"} 4
istio_requests_total{reporter="source",destination_service="backend.default.svc.cluster.local",response_code="200",response_flags="-"} 5
istio_requests_total{reporter="source",destination_service="backend.default.svc.cluster.local",response_code="503",response_flags="URX"} 1
`},
	}
	var p Topology
	top := p.Sample(t.Context(), d)
	if len(top.Edges) != 1 || top.Edges[0].From != "frontend-v1" || top.Edges[0].To != host || top.Edges[0].Requests != 10 || top.Edges[0].Errors != 5 || top.Edges[0].Metric != api.EdgeMetricIstio {
		t.Fatalf("edges = %+v; want frontend-v1 -> %s from istio_requests_total: 4 aborted + 6 sent, 4+1 5xx", top.Edges, host)
	}
	if be := top.Pods[0]; be.Name != "backend-v1" || be.Ready || be.Epoch != -1 {
		t.Errorf("backend-v1 (agent unreachable) = %+v; want not ready, no epoch", be)
	}
	if fe := top.Pods[1]; !fe.Ready || fe.Epoch != 0 {
		t.Errorf("frontend-v1 = %+v; want ready in epoch 0", fe)
	}
	d.status["frontend-v1"] = live(agentapi.EpochStatus{Epoch: 0, State: agentapi.EpochDraining}, agentapi.EpochStatus{Epoch: 1, State: agentapi.EpochLive, PID: 42})
	if top = p.Sample(t.Context(), d); top.Pods[1].Epoch != 1 {
		t.Errorf("after the hot restart, frontend-v1 = %+v; want epoch 1", top.Pods[1])
	}
	var got []string
	for _, e := range d.events {
		got = append(got, e.Kind+" "+e.Pod+" "+e.Message)
	}
	want := "epoch.state frontend-v1 proxy epoch 0 is draining\nepoch.state frontend-v1 proxy epoch 1 is live"
	if strings.Join(got, "\n") != want {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}

// TestWriteMetricsMerges writes the control plane's metrics, then the sidecars' families
// merged by name with pod and namespace labels; a sidecar that does not answer is left out.
func TestWriteMetricsMerges(t *testing.T) {
	const fam = "# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total{cluster_name=\"x\"} %d\n"
	d := &fakeDeps{model: hello(), get: map[string]string{
		"backend-v1 /admin/stats/prometheus":  fmt.Sprintf(fam, 3),
		"frontend-v1 /admin/stats/prometheus": fmt.Sprintf(fam, 5),
	}}
	cp := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "meshlab_xds_connected_proxies", Help: "h"})
	g.Set(2)
	cp.MustRegister(g)
	var b strings.Builder
	if err := WriteMetrics(t.Context(), d, cp, slog.New(slog.DiscardHandler), &b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP meshlab_xds_connected_proxies h
# TYPE meshlab_xds_connected_proxies gauge
meshlab_xds_connected_proxies 2
# TYPE envoy_cluster_upstream_rq_total counter
envoy_cluster_upstream_rq_total{cluster_name="x",namespace="default",pod="backend-v1"} 3
envoy_cluster_upstream_rq_total{cluster_name="x",namespace="default",pod="frontend-v1"} 5
`
	// The two pods are read in parallel: either may come first within the family.
	alt := strings.Replace(strings.Replace(want, "pod=\"backend-v1\"} 3", "X", 1), "pod=\"frontend-v1\"} 5", "pod=\"backend-v1\"} 3", 1)
	alt = strings.Replace(alt, "X", "pod=\"frontend-v1\"} 5", 1)
	if got := b.String(); got != want && got != alt {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
	delete(d.get, "backend-v1 /admin/stats/prometheus")
	b.Reset()
	if err := WriteMetrics(t.Context(), d, cp, slog.New(slog.DiscardHandler), &b); err != nil || strings.Contains(b.String(), "backend-v1") || !strings.Contains(b.String(), "frontend-v1") {
		t.Errorf("with backend-v1 unreachable: %v\n%s", err, b.String())
	}
}
