package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
)

// fakeLab is a lab seen through Deps: every pod dials the one app server, and each
// pod's counters (capture rules and proxy stats) rise by one request after their first
// read, as the traced request would make them.
type fakeLab struct {
	model  *model.Model
	app    string                      // the app server's address
	stats  map[string]map[string]int64 // pod -> counters before the request
	rules  map[string]string           // pod -> iptables-save -c before, "%d" for the counter
	mu     sync.Mutex
	reads  map[string]int
	events []string
	// ztunnel is the lab's ztunnel (nil: none) and ztunnelLog its log file; onClose, when
	// set, is called with the traced connection's addresses when the client closes it.
	ztunnel    *model.Pod
	ztunnelLog string
	onClose    func(local, remote net.Addr)
}

func (f *fakeLab) Model() *model.Model { return f.model }

func (f *fakeLab) DialFrom(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", f.app)
	if err != nil || f.onClose == nil {
		return c, err
	}
	return &closeHook{Conn: c, f: f.onClose}, nil
}

// closeHook calls f once when the connection is closed, as ztunnel logs a connection
// when it ends.
type closeHook struct {
	net.Conn
	f    func(local, remote net.Addr)
	once sync.Once
}

func (c *closeHook) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.f(c.LocalAddr(), c.RemoteAddr()) })
	return err
}

// read counts one read of what; the first read is "before", any later one "after".
func (f *fakeLab) read(what string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[what]++
	return min(int64(f.reads[what]-1), 1)
}

func (f *fakeLab) AgentGet(_ context.Context, pod, path string) (io.ReadCloser, error) {
	if path != "/admin/stats" {
		return nil, fmt.Errorf("GET %s: 404 Not Found", path)
	}
	rise := f.read(pod + " stats")
	var b strings.Builder
	for k, v := range f.stats[pod] {
		fmt.Fprintf(&b, "%s: %d\n", k, v+rise)
	}
	return io.NopCloser(strings.NewReader(b.String())), nil
}

func (f *fakeLab) CaptureRules(pod string) (string, error) {
	r, ok := f.rules[pod]
	if !ok {
		return "", errors.New("no namespace")
	}
	return fmt.Sprintf(r, 7+f.read(pod+" rules")), nil
}

func (f *fakeLab) AccessLogFile(string, string) string { return "" }

func (f *fakeLab) Ztunnel() *model.Pod { return f.ztunnel }

func (f *fakeLab) ZtunnelLogFile() string { return f.ztunnelLog }

func (f *fakeLab) Publish(kind, pod, msg string, _ map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, kind+" "+pod+" "+msg)
}

// TestTraceThroughDeps traces one request through a lab given only as Deps: the hops
// come from the counters that rose (capture rules, outbound and inbound clusters, RBAC),
// the app's echo (who answered, x-forwarded-client-cert for mTLS and identities) and the
// response's upstream service time; a config_dump that cannot be read is a note.
func TestTraceThroughDeps(t *testing.T) {
	const (
		host = "backend.default.svc.cluster.local"
		xfcc = `By=spiffe://cluster.local/ns/default/sa/backend;Hash=ab;URI=spiffe://cluster.local/ns/default/sa/frontend`
	)
	var gotID string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotID = r.Header.Get("X-Request-Id")
		w.Header().Set("X-Envoy-Upstream-Service-Time", "3")
		fmt.Fprintf(w, `{"pod":"backend-v1","version":"v1","headers":{"X-Forwarded-Client-Cert":%q}}`, xfcc)
	}))
	t.Cleanup(app.Close)
	fe := &model.Pod{Name: "frontend-v1", Namespace: "default", Labels: map[string]string{"app": "frontend"}, IP: netip.MustParseAddr("10.244.0.2"), Sidecar: model.SidecarSpec{Inject: true}}
	be := &model.Pod{Name: "backend-v1", Namespace: "default", Labels: map[string]string{"app": "backend"}, IP: netip.MustParseAddr("10.244.0.3"), Sidecar: model.SidecarSpec{Inject: true}}
	svc := &model.Service{Name: "backend", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10"), Selector: map[string]string{"app": "backend"},
		Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080}}}
	f := &fakeLab{
		model: model.New([]*model.Service{svc}, []*model.Pod{fe, be}),
		app:   app.Listener.Addr().String(),
		stats: map[string]map[string]int64{
			"frontend-v1": {"cluster.outbound|8080||" + host + ".upstream_rq_total": 4, "server.uptime": 9},
			"backend-v1":  {"cluster.inbound|8080||.upstream_rq_total": 2, "http.inbound_0.0.0.0_8080.rbac.allowed": 2},
		},
		rules: map[string]string{
			"frontend-v1": "*nat\n:OUTPUT ACCEPT [0:0]\n[%d:420] -A ISTIO_OUTPUT -m comment --comment \"to the sidecar\" -j ISTIO_REDIRECT\nCOMMIT\n",
		},
		reads: map[string]int{},
	}
	res, err := Trace(t.Context(), f, api.TraceRequest{Pod: "frontend-v1", Target: "backend:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || res.Address != "10.96.0.10:8080" || res.RequestID == "" || gotID != res.RequestID {
		t.Fatalf("result = %+v (the app saw request id %q); want 200 from 10.96.0.10:8080 with the trace's request id", res, gotID)
	}
	var kinds []string
	for _, h := range res.Hops {
		kinds = append(kinds, string(h.Kind)+":"+h.Pod+":"+h.Direction)
	}
	want := "capture:frontend-v1: proxy:frontend-v1:outbound capture:backend-v1: proxy:backend-v1:inbound app:backend-v1:"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("hops = %s\nwant   %s", got, want)
	}
	if r := res.Hops[0].Rules; len(r) != 1 || r[0].Chain != "ISTIO_OUTPUT" || r[0].Comment != "to the sidecar" || r[0].Packets != 1 {
		t.Errorf("frontend capture rules = %+v; want the one rule that counted a packet", r)
	}
	out := res.Hops[1]
	if out.Cluster == nil || out.Cluster.Name != "outbound|8080||"+host || !out.MTLS || out.PeerIdentity != "spiffe://cluster.local/ns/default/sa/backend" ||
		out.Endpoint != "10.244.0.3:8080" || out.UpstreamServiceTimeMs == nil || *out.UpstreamServiceTimeMs != 3 || !strings.Contains(out.Notes, "config_dump unavailable") {
		t.Errorf("outbound hop = %+v", out)
	}
	if _, ok := out.Stats["server.uptime"]; ok {
		t.Errorf("outbound stats carry server.* counters: %v", out.Stats)
	}
	in := res.Hops[3]
	if in.Cluster == nil || in.Cluster.Name != "inbound|8080||" || in.RBAC != "allowed" || in.PeerIdentity != "spiffe://cluster.local/ns/default/sa/frontend" || in.Endpoint != "10.244.0.3:8080" {
		t.Errorf("inbound hop = %+v", in)
	}
	if res.Hops[4].Version != "v1" {
		t.Errorf("app hop = %+v", res.Hops[4])
	}
	if len(f.events) != 1 || !strings.HasPrefix(f.events[0], "traffic.traced frontend-v1 traced http://backend:8080/: 200") {
		t.Errorf("events = %q", f.events)
	}
	if _, err := Trace(t.Context(), f, api.TraceRequest{Pod: "nope", Target: "backend:8080"}); !errors.Is(err, api.ErrUnknownPod) || !strings.Contains(err.Error(), "frontend-v1") {
		t.Errorf("unknown pod: %v; want ErrUnknownPod naming the pods there are", err)
	}
	if _, err := Trace(t.Context(), f, api.TraceRequest{Pod: "frontend-v1", Target: "example.com:80"}); !errors.Is(err, api.ErrBadTraffic) {
		t.Errorf("a target outside the lab: %v; want ErrBadTraffic", err)
	}
}
