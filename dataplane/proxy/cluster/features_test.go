package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func run(t *testing.T, c *clusterv3.Cluster) (*Cluster, *stats.Store) {
	t.Helper()
	if c.LoadAssignment == nil {
		c.LoadAssignment = cla(c.Name, nil, "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80")
	}
	cfg, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	store := stats.NewStore()
	m := NewManager(store)
	t.Cleanup(m.Close)
	m.AddStatic([]*Config{cfg})
	cl, _ := m.Get(c.Name)
	return cl, store
}

func TestLoadBalancerPolicies(t *testing.T) {
	t.Run("LEAST_REQUEST prefers the host with fewer active requests", func(t *testing.T) {
		cl, _ := run(t, &clusterv3.Cluster{Name: "lr", LbPolicy: clusterv3.Cluster_LEAST_REQUEST,
			LoadAssignment: cla("lr", nil, "10.0.0.1:80", "10.0.0.2:80")})
		busy := Host{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Healthy: true}
		cl.hostState(busy).rqActive.Store(10)
		got := map[string]int{}
		for i := 0; i < 1000; i++ {
			h, _ := cl.Pick(netip.AddrPort{})
			got[h.String()]++
		}
		// Two random choices: the busy host wins only when both draws land on it (1/4).
		if got["10.0.0.1:80"] < 150 || got["10.0.0.1:80"] > 350 {
			t.Errorf("power of two choices picks = %v, want about 250 for the busy host", got)
		}
	})
	t.Run("RANDOM spreads over every host", func(t *testing.T) {
		cl, _ := run(t, &clusterv3.Cluster{Name: "rnd", LbPolicy: clusterv3.Cluster_RANDOM})
		got := map[string]int{}
		for i := 0; i < 4000; i++ {
			h, _ := cl.Pick(netip.AddrPort{})
			got[h.String()]++
		}
		for h, n := range got {
			if n < 800 || n > 1200 {
				t.Errorf("random picks of %s = %d of 4000", h, n)
			}
		}
		if len(got) != 4 {
			t.Errorf("hosts picked: %v", got)
		}
	})
	t.Run("panic mode routes to every host below the healthy threshold", func(t *testing.T) {
		cl, store := run(t, &clusterv3.Cluster{Name: "p", LoadAssignment: cla("p",
			[]corev3.HealthStatus{corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_HEALTHY}, "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80")})
		got := map[string]int{}
		for i := 0; i < 30; i++ {
			h, _ := cl.Pick(netip.AddrPort{})
			got[h.String()]++
		}
		if len(got) != 3 || store.Value("cluster.p.lb_healthy_panic") != 30 {
			t.Errorf("panic picks = %v, lb_healthy_panic = %d", got, store.Value("cluster.p.lb_healthy_panic"))
		}
	})
}

func TestCircuitBreakerOverflowsAsEnvoysHTTP1Pool(t *testing.T) {
	cl, store := run(t, &clusterv3.Cluster{Name: "cb", CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(1), MaxRetries: wrapperspb.UInt32(1), TrackRemaining: true,
	}}}})
	if store.Value("cluster.cb.circuit_breakers.default.remaining_rq") != 1024 || store.Value("cluster.cb.circuit_breakers.default.remaining_cx") != 1 {
		t.Error("remaining_* gauges not published with track_remaining")
	}
	ctx := context.Background()
	first, err := cl.Admit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if store.Value("cluster.cb.circuit_breakers.default.remaining_cx") != 0 {
		t.Error("remaining_cx not 0 with the only connection busy")
	}
	if store.Value("cluster.cb.circuit_breakers.default.cx_open") != 1 {
		t.Error("cx_open not set with the only connection busy")
	}
	pending := make(chan error, 1)
	go func() {
		done, err := cl.Admit(ctx)
		if err == nil {
			done()
		}
		pending <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for store.Value("cluster.cb.upstream_rq_pending_active") != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := cl.Admit(ctx); !errors.Is(err, ErrOverflow) {
		t.Errorf("third request: err = %v, want overflow", err)
	}
	first()
	if err := <-pending; err != nil {
		t.Errorf("pending request: %v", err)
	}
	for name, want := range map[string]int64{
		"cluster.cb.upstream_cx_overflow":                     2,
		"cluster.cb.upstream_rq_pending_overflow":             1,
		"cluster.cb.circuit_breakers.default.cx_open":         0,
		"cluster.cb.circuit_breakers.default.rq_pending_open": 0,
		"cluster.cb.upstream_rq_pending_active":               0,
	} {
		if got := store.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	r1, ok := cl.AdmitRetry()
	if !ok {
		t.Fatal("first retry refused")
	}
	if _, ok := cl.AdmitRetry(); ok || store.Value("cluster.cb.upstream_rq_retry_overflow") != 1 {
		t.Error("max_retries 1 admitted a second concurrent retry")
	}
	r1()
}

func TestOutlierDetectionEjectsAfterConsecutive5xxAndReturnsTheHost(t *testing.T) {
	cl, store := run(t, &clusterv3.Cluster{Name: "od", OutlierDetection: &clusterv3.OutlierDetection{
		Consecutive_5Xx: wrapperspb.UInt32(3), Interval: durationpb.New(50 * time.Millisecond),
		BaseEjectionTime: durationpb.New(100 * time.Millisecond), MaxEjectionPercent: wrapperspb.UInt32(25),
	}})
	bad := Host{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Healthy: true}
	other := Host{Addr: netip.MustParseAddrPort("10.0.0.2:80"), Healthy: true}
	cl.ReportResult(bad, 500)
	cl.ReportResult(bad, 502)
	cl.ReportResult(bad, 200) // a success resets the run
	for i := 0; i < 3; i++ {
		cl.ReportResult(bad, 503)
	}
	if cl.HealthFlags(bad) != "/failed_outlier_check" {
		t.Fatalf("health flags = %q, want ejected", cl.HealthFlags(bad))
	}
	for i := 0; i < 100; i++ {
		if h, _ := cl.Pick(netip.AddrPort{}); h.String() == bad.String() {
			t.Fatal("load balancer picked an ejected host")
		}
	}
	// A second host would exceed max_ejection_percent (2 of 4 > 25%).
	for i := 0; i < 3; i++ {
		cl.ReportResult(other, 500)
	}
	if cl.HealthFlags(other) != "healthy" || store.Value("cluster.od.outlier_detection.ejections_overflow") != 1 {
		t.Errorf("max_ejection_percent not enforced: %q overflow=%d", cl.HealthFlags(other), store.Value("cluster.od.outlier_detection.ejections_overflow"))
	}
	for name, want := range map[string]int64{
		"cluster.od.outlier_detection.ejections_active":                   1,
		"cluster.od.outlier_detection.ejections_enforced_total":           1,
		"cluster.od.outlier_detection.ejections_enforced_consecutive_5xx": 1,
		"cluster.od.outlier_detection.ejections_detected_consecutive_5xx": 2,
	} {
		if got := store.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for cl.HealthFlags(bad) != "healthy" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if cl.HealthFlags(bad) != "healthy" || store.Value("cluster.od.outlier_detection.ejections_active") != 0 {
		t.Error("host not returned after base_ejection_time")
	}
	// The second ejection lasts twice as long (base_ejection_time x ejections).
	for i := 0; i < 3; i++ {
		cl.ReportResult(bad, 500)
	}
	start := time.Now()
	for cl.HealthFlags(bad) != "healthy" && time.Since(start) < 5*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("second ejection lasted %v, want about 200ms", d)
	}
}

func TestMaxRequestsPerConnectionClosesUpstreamConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	opts, _ := anypb.New(&httpv3.HttpProtocolOptions{CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{MaxRequestsPerConnection: wrapperspb.UInt32(2)},
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}}})
	cl, store := run(t, &clusterv3.Cluster{Name: "mr", LoadAssignment: cla("mr", nil, srv.Listener.Addr().String()),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsName: opts}})
	for i := 0; i < 6; i++ {
		h, _ := cl.Pick(netip.AddrPort{})
		req, _ := http.NewRequest("GET", "http://x/", nil)
		resp, err := cl.RoundTrip(req, h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if conns.Load() != 3 || store.Value("cluster.mr.upstream_cx_max_requests") != 3 {
		t.Errorf("6 requests at 2 per connection used %d connections (max_requests %d), want 3", conns.Load(), store.Value("cluster.mr.upstream_cx_max_requests"))
	}
}

// TestOutlierDetectionConsecutiveGatewayFailure pins Envoy's gateway-error detector: 502,
// 503 and 504 in a row are detected, but eject only with
// enforcing_consecutive_gateway_failure (default 0); a 500 breaks the run.
func TestOutlierDetectionConsecutiveGatewayFailure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		enforcing *wrapperspb.UInt32Value
		ejected   bool
	}{
		{"detected but not enforced by default", nil, false},
		{"enforced at 100 percent ejects", wrapperspb.UInt32(100), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, store := run(t, &clusterv3.Cluster{Name: "gw", OutlierDetection: &clusterv3.OutlierDetection{
				Consecutive_5Xx: wrapperspb.UInt32(100), ConsecutiveGatewayFailure: wrapperspb.UInt32(3),
				EnforcingConsecutiveGatewayFailure: tc.enforcing, Interval: durationpb.New(time.Hour),
				BaseEjectionTime: durationpb.New(time.Hour), MaxEjectionPercent: wrapperspb.UInt32(100),
			}})
			h := Host{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Healthy: true}
			cl.ReportResult(h, 502)
			cl.ReportResult(h, 504)
			cl.ReportResult(h, 500) // not a gateway error: the run starts again
			cl.ReportResult(h, 502)
			if store.Value("cluster.gw.outlier_detection.ejections_detected_consecutive_gateway_failure") != 0 {
				t.Fatal("a 500 must break the run of gateway errors")
			}
			for _, code := range []int{503, 504} {
				cl.ReportResult(h, code)
			}
			if got := store.Value("cluster.gw.outlier_detection.ejections_detected_consecutive_gateway_failure"); got != 1 {
				t.Errorf("ejections_detected_consecutive_gateway_failure = %d, want 1", got)
			}
			if ejected := cl.HealthFlags(h) == "/failed_outlier_check"; ejected != tc.ejected {
				t.Errorf("ejected = %v, want %v (flags %q)", ejected, tc.ejected, cl.HealthFlags(h))
			}
		})
	}
}
