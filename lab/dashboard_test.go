package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/web"
)

func TestParseListen(t *testing.T) {
	for in, ok := range map[string]bool{
		"127.0.0.1:15080": true, "127.0.0.1:0": true, "192.168.1.5:80": true, "[::1]:8080": true,
		"0.0.0.0:15080": false, "[::]:1": false, ":15080": false, "localhost:15080": false, "127.0.0.1": false, "": false,
	} {
		if _, err := ParseListen(in); (err == nil) != ok {
			t.Errorf("ParseListen(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

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
	var p topoPoller
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
		got, err := resolveTarget(m, p, u)
		if err != nil || got.String() != want {
			t.Errorf("resolveTarget(%s) = %v, %v; want %s", in, got, err, want)
		}
	}
	u, _ := url.Parse("http://example.com/")
	if _, err := resolveTarget(m, p, u); err == nil {
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

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	if got := tailLines(path, 5); len(got) != 0 {
		t.Errorf("missing file: %v", got)
	}
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tailLines(path, 2), ","); got != "b,c" {
		t.Errorf("tail 2 = %q", got)
	}
	if got := strings.Join(tailLines(path, 10), ","); got != "a,b,c" {
		t.Errorf("tail 10 = %q", got)
	}
	if got := tailLines(path, 0); len(got) != 0 {
		t.Errorf("tail 0 = %v", got)
	}
}

func TestSendTrafficRefusesBadRequests(t *testing.T) {
	l := &Lab{model: hello()}
	for _, r := range []web.TrafficRequest{
		{Pod: "frontend-v1", URL: "http://example.com/", N: 1},
		{Pod: "frontend-v1", URL: "ftp://backend/", N: 1},
		{Pod: "frontend-v1", URL: "http://backend/", N: 0},
	} {
		if _, err := l.SendTraffic(t.Context(), r); !errors.Is(err, web.ErrBadTraffic) {
			t.Errorf("SendTraffic(%+v) = %v; want a bad-traffic error", r, err)
		}
	}
	if _, err := l.SendTraffic(t.Context(), web.TrafficRequest{Pod: "nope", URL: "http://backend/", N: 1}); !errors.Is(err, web.ErrUnknownPod) {
		t.Errorf("unknown pod: %v", err)
	}
}

func TestListenDashboardFallsBackOnlyForTheDefault(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	l := &Lab{log: testutil.Logger(t)}
	l.opts.Listen = taken.Addr().String()
	if ln, err := l.listenDashboard(); err == nil {
		ln.Close()
		t.Fatal("an explicit --listen address that is taken was replaced")
	}
	l.opts.ListenFallback = true
	ln, err := l.listenDashboard()
	if err != nil {
		t.Fatalf("fallback: %v", err)
	}
	defer ln.Close()
	if got := ln.Addr().String(); got == taken.Addr().String() || !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("fallback listens on %s; want another port of 127.0.0.1", got)
	}
	l.opts.Listen = "0.0.0.0:0"
	if _, err := l.listenDashboard(); err == nil {
		t.Error("a wildcard address was accepted")
	}
}

func TestServeDashboardRecordsURL(t *testing.T) {
	var out strings.Builder
	l := &Lab{log: testutil.Logger(t), out: &out, paths: Paths{Dir: t.TempDir()}, bus: NewBus(4)}
	l.opts.Listen = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(t.Context())
	if err := l.serveDashboard(ctx, http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	cancel()
	l.servers.Wait()
	if out.Len() != 0 {
		t.Errorf("loopback listen printed %q", out.String())
	}
	u, err := ReadDashboardURL(l.paths)
	if err != nil || u != l.DashboardURL() || !strings.Contains(u, "/?token=") {
		t.Errorf("recorded URL %q (%v), lab says %q", u, err, l.DashboardURL())
	}
	if fi, err := os.Stat(l.paths.DashboardURLFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("dashboard.url mode = %v (%v), want 0600: it holds the token", fi.Mode().Perm(), err)
	}
}

func TestExposureWarning(t *testing.T) {
	for addr, warn := range map[string]bool{"127.0.0.1:15080": false, "[::1]:80": false, "192.168.1.5:15080": true, "10.0.0.1:1": true} {
		if got := exposureWarning(addr); (got != "") != warn {
			t.Errorf("exposureWarning(%s) = %q, want warning=%v", addr, got, warn)
		}
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
	var p topoPoller
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		t := buildTopology(m, samples)
		p.rates(&t, samples, m, now.Add(time.Duration(i)*time.Second))
	}
}
