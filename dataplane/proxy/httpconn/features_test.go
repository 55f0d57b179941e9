package httpconn

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// lab is one HCM with a fault filter and a file access log in front of real backends.
type lab struct {
	addr    string
	store   *stats.Store
	logPath string
	client  *http.Client
}

func mustAny(tb testing.TB, m proto.Message) *anypb.Any {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func newLab(tb testing.TB, clusters []*cluster.Config, routes ...*routev3.Route) *lab {
	tb.Helper()
	return newLabHCM(tb, nil, clusters, routes...)
}

// newLabHCM is newLab with the HCM changed by mutate before it is compiled.
func newLabHCM(tb testing.TB, mutate func(*hcmv3.HttpConnectionManager), clusters []*cluster.Config, routes ...*routev3.Route) *lab {
	tb.Helper()
	l := &lab{store: stats.NewStore(), logPath: filepath.Join(tb.TempDir(), "access.log")}
	cm := cluster.NewManager(l.store)
	cm.AddStatic(clusters)
	tb.Cleanup(cm.Close)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "lab",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: routes,
				ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-vhost", Value: "yes"}}}}}}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(tb, &faultv3.HTTPFault{})}},
			{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(tb, &routerv3.Router{})}},
		},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{
			TypedConfig: mustAny(tb, &filev3.FileAccessLog{Path: l.logPath})}}},
	}
	if mutate != nil {
		mutate(hcm)
	}
	cfg, err := Compile(mustAny(tb, hcm))
	if err != nil {
		tb.Fatal(err)
	}
	l.addr = serveHCM(tb, cfg, Deps{Routes: NewRouteStore(), Clusters: cm, Stats: l.store, Logger: testutil.Logger(tb)})
	l.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	tb.Cleanup(l.client.CloseIdleConnections)
	return l
}

func (l *lab) get(t *testing.T, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+l.addr+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (l *lab) logLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(l.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// waitLines polls until the access log has n lines: Envoy, like this proxy, writes the
// entry after the response has gone out.
func (l *lab) waitLines(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := l.logLines(t)
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// backend is an httptest server answering with its name; fail decides 503s.
func backend(tb testing.TB, name string, h http.HandlerFunc) string {
	tb.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }
	}
	s := httptest.NewServer(h)
	tb.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func to(c string) *routev3.RouteAction {
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: c}}
}

func routeTo(m *routev3.RouteMatch, a *routev3.RouteAction) *routev3.Route {
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: a}}
}

func withCluster(t *testing.T, c *clusterv3.Cluster, hosts ...string) *cluster.Config {
	t.Helper()
	base := staticCluster(t, c.Name, hosts...)
	c.LoadAssignment = base.Proto.LoadAssignment
	c.ConnectTimeout = durationpb.New(time.Second)
	cfg, err := cluster.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestWeightedClustersSplitNinetyTen(t *testing.T) {
	v1 := backend(t, "v1", nil)
	v2 := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "v2.internal" {
			w.WriteHeader(500)
		}
		io.WriteString(w, "v2")
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "v1", v1), staticCluster(t, "v2", v2)},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
			Clusters: []*routev3.WeightedCluster_ClusterWeight{
				{Name: "v1", Weight: wrapperspb.UInt32(90)},
				{Name: "v2", Weight: wrapperspb.UInt32(10), HostRewriteSpecifier: &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "v2.internal"},
					ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-subset", Value: "v2"}}}},
			}}}}))
	got := map[string]int{}
	for i := 0; i < 1000; i++ {
		resp, body := l.get(t, "/")
		got[body]++
		if (body == "v2") != (resp.Header.Get("X-Subset") == "v2") || resp.Header.Get("X-Vhost") != "yes" {
			t.Fatalf("weighted cluster / vhost response headers wrong for %s: %v", body, resp.Header)
		}
	}
	// 1000 draws at p=0.1: sd is about 9.5, so 60..140 is beyond 4 sd.
	if got["v2"] < 60 || got["v2"] > 140 || got["v1"]+got["v2"] != 1000 {
		t.Errorf("90/10 split = %v", got)
	}
}

func TestRetriesTurnAHalfFailingBackendIntoSuccess(t *testing.T) {
	var n atomic.Int64
	flaky := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "flaky", flaky)},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "flaky"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(3)}}))
	ok := 0
	for i := 0; i < 100; i++ {
		if resp, _ := l.get(t, "/"); resp.StatusCode == 200 {
			ok++
		}
	}
	if ok != 100 {
		t.Errorf("%d of 100 succeeded with retries", ok)
	}
	retry, success := l.store.Value("cluster.flaky.upstream_rq_retry"), l.store.Value("cluster.flaky.upstream_rq_retry_success")
	if retry < 40 || retry != success || l.store.Value("cluster.flaky.upstream_rq_503") != retry {
		t.Errorf("upstream_rq_retry = %d, retry_success = %d, upstream_rq_503 = %d", retry, success, l.store.Value("cluster.flaky.upstream_rq_503"))
	}
}

func TestRetryLimitAndPerTryTimeout(t *testing.T) {
	always := backend(t, "", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	var calls atomic.Int64
	slowOnce := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		io.WriteString(w, "second try")
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "always", always), staticCluster(t, "slow", slowOnce)},
		routeTo(prefix("/limit"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "always"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{503}, NumRetries: wrapperspb.UInt32(2)}}),
		routeTo(prefix("/slow"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "slow"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "gateway-error", PerTryTimeout: durationpb.New(100 * time.Millisecond)}}))
	if resp, _ := l.get(t, "/limit"); resp.StatusCode != 503 {
		t.Errorf("exhausted retries: status %d, want the last 503", resp.StatusCode)
	}
	resp, body := l.get(t, "/slow")
	if resp.StatusCode != 200 || body != "second try" {
		t.Errorf("per-try timeout retry: %d %q", resp.StatusCode, body)
	}
	for name, want := range map[string]int64{
		"cluster.always.upstream_rq_retry":                2,
		"cluster.always.upstream_rq_retry_limit_exceeded": 1,
		"cluster.always.upstream_rq_503":                  3,
		"cluster.slow.upstream_rq_per_try_timeout":        1,
		"cluster.slow.upstream_rq_retry_success":          1,
	} {
		if got := l.store.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if lines := l.logLines(t); !strings.Contains(lines[0], `"GET /limit HTTP/1.1" 503 URX `) {
		t.Errorf("access log line for exhausted retries: %s", lines[0])
	}
}

// TestPerTryTimeoutOnTheRoutersTimer: under Istio's HCM (stream_idle_timeout 0, so the
// downstream connection's hook stands for the request's context) a per-try timeout is
// the router's timer: it ends the slow first attempt's exchange through the hook, which
// the request survives, and the retry answers; without the timer's interrupt the first
// attempt waits for the upstream's 5 s.
func TestPerTryTimeoutOnTheRoutersTimer(t *testing.T) {
	var calls atomic.Int64
	firstEnded := make(chan struct{})
	slowOnce := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select {
			case <-r.Context().Done(): // the proxy closed the attempt's connection
				close(firstEnded)
			case <-time.After(5 * time.Second):
			}
			return
		}
		io.WriteString(w, "second try")
	})
	l := newLabHCM(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) },
		[]*cluster.Config{staticCluster(t, "slow", slowOnce)},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "slow"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "gateway-error", PerTryTimeout: durationpb.New(100 * time.Millisecond)}}))
	start := time.Now()
	resp, body := l.get(t, "/")
	if took := time.Since(start); resp.StatusCode != 200 || body != "second try" || took > 3*time.Second {
		t.Fatalf("per-try timeout and retry: %d %q after %v, want 200 \"second try\" well before the first attempt's 5 s", resp.StatusCode, body, took)
	}
	select {
	case <-firstEnded:
	case <-time.After(5 * time.Second):
		t.Error("the first attempt's upstream connection was not closed")
	}
	for name, want := range map[string]int64{
		"cluster.slow.upstream_rq_per_try_timeout": 1,
		"cluster.slow.upstream_rq_retry":           1,
		"cluster.slow.upstream_rq_retry_success":   1,
		"cluster.slow.upstream_rq_timeout":         0,
	} {
		if got := l.store.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestPerTryTimeoutIgnoredOnceTheResponseStarted: as Envoy's
// UpstreamRequest::onPerTryTimeout, a per-try timeout that runs out after the response
// started downstream is ignored and the body streams on to its end, under Istio's HCM
// (the connection's hook) and Envoy's default one (the pool's watch of the context).
func TestPerTryTimeoutIgnoredOnceTheResponseStarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*hcmv3.HttpConnectionManager)
	}{
		{"istio", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) }},
		{"envoy-default", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slowBody := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "head ")
				w.(http.Flusher).Flush()
				time.Sleep(300 * time.Millisecond) // past the 100 ms per-try timeout
				io.WriteString(w, "tail")
			})
			l := newLabHCM(t, tc.mutate, []*cluster.Config{staticCluster(t, "slow", slowBody)},
				routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "slow"},
					RetryPolicy: &routev3.RetryPolicy{RetryOn: "gateway-error", PerTryTimeout: durationpb.New(100 * time.Millisecond)}}))
			resp, body := l.get(t, "/")
			if resp.StatusCode != 200 || body != "head tail" {
				t.Errorf("a response slower than the per-try timeout after its headers: %d %q, want 200 \"head tail\"", resp.StatusCode, body)
			}
			if got := l.store.Value("cluster.slow.upstream_rq_per_try_timeout"); got != 0 {
				t.Errorf("upstream_rq_per_try_timeout = %d, want 0", got)
			}
		})
	}
}

func TestCircuitBreakerMaxConnectionsOneGivesOverflow(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	slow := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	cb := withCluster(t, &clusterv3.Cluster{Name: "cb", CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(1)}}}}, slow)
	l := newLab(t, []*cluster.Config{cb}, routeTo(prefix("/"), to("cb")))
	const clients = 6
	codes := make(chan *http.Response, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "http://"+l.addr+"/", nil)
			resp, err := l.client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.store.Value("cluster.cb.upstream_rq_pending_overflow") < clients-2 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	once.Do(func() { close(release) })
	wg.Wait()
	close(codes)
	overflow, ok := 0, 0
	for resp := range codes {
		switch {
		case resp.StatusCode == 503 && resp.Header.Get("X-Envoy-Overloaded") == "true":
			overflow++
		case resp.StatusCode == 200:
			ok++
		}
	}
	if overflow != clients-2 || ok != 2 {
		t.Errorf("max_connections 1, max_pending 1, %d clients: %d overflowed, %d ok", clients, overflow, ok)
	}
	uo := 0
	for _, line := range l.waitLines(t, clients) {
		if strings.Contains(line, " 503 UO ") {
			uo++
		}
	}
	if uo != clients-2 {
		t.Errorf("%d access log lines with 503 UO, want %d", uo, clients-2)
	}
}

func TestOutlierDetectionEjectsTheFailingHost(t *testing.T) {
	good := backend(t, "good", nil)
	bad := backend(t, "", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	od := withCluster(t, &clusterv3.Cluster{Name: "od", OutlierDetection: &clusterv3.OutlierDetection{
		Consecutive_5Xx: wrapperspb.UInt32(2), BaseEjectionTime: durationpb.New(time.Minute), MaxEjectionPercent: wrapperspb.UInt32(50)}}, good, bad)
	l := newLab(t, []*cluster.Config{od}, routeTo(prefix("/"), to("od")))
	fails := 0
	for i := 0; i < 40; i++ {
		if resp, _ := l.get(t, "/"); resp.StatusCode == 500 {
			fails++
		}
	}
	if fails != 2 || l.store.Value("cluster.od.outlier_detection.ejections_active") != 1 {
		t.Errorf("%d failures reached the client, ejections_active = %d; want 2 then ejection",
			fails, l.store.Value("cluster.od.outlier_detection.ejections_active"))
	}
}

func faultAny(t *testing.T, delay time.Duration, delayPct uint32, abort uint32, abortPct uint32) map[string]*anypb.Any {
	t.Helper()
	f := &faultv3.HTTPFault{}
	if delay > 0 {
		f.Delay = &faultcommonv3.FaultDelay{FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(delay)},
			Percentage: &typev3.FractionalPercent{Numerator: delayPct}}
	}
	if abort > 0 {
		f.Abort = &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: abort},
			Percentage: &typev3.FractionalPercent{Numerator: abortPct * 10000, Denominator: typev3.FractionalPercent_MILLION}}
	}
	return map[string]*anypb.Any{"envoy.filters.http.fault": mustAny(t, f)}
}

func TestFaultInjectionPerRoute(t *testing.T) {
	svc := backend(t, "svc", nil)
	abort := routeTo(prefix("/abort"), to("svc"))
	abort.TypedPerFilterConfig = faultAny(t, 0, 0, 503, 50)
	delay := routeTo(prefix("/delay"), to("svc"))
	delay.TypedPerFilterConfig = faultAny(t, 150*time.Millisecond, 100, 0, 0)
	l := newLab(t, []*cluster.Config{staticCluster(t, "svc", svc)}, abort, delay, routeTo(prefix("/"), to("svc")))
	aborted := 0
	for i := 0; i < 400; i++ {
		resp, body := l.get(t, "/abort")
		if resp.StatusCode == 503 {
			if body != "fault filter abort" {
				t.Fatalf("abort body %q", body)
			}
			aborted++
		}
	}
	// p=0.5 over 400: sd 10, 140..260 is 6 sd.
	if aborted < 140 || aborted > 260 || l.store.Value("http.lab.fault.aborts_injected") != int64(aborted) {
		t.Errorf("abort 50%%: %d of 400 aborted, aborts_injected = %d", aborted, l.store.Value("http.lab.fault.aborts_injected"))
	}
	start := time.Now()
	resp, body := l.get(t, "/delay")
	if resp.StatusCode != 200 || body != "svc" || time.Since(start) < 150*time.Millisecond {
		t.Errorf("delay 100%%: %d %q after %v", resp.StatusCode, body, time.Since(start))
	}
	// Envoy's router counts x-envoy-upstream-service-time from when it took the request,
	// after the fault filter: the injected delay is not the upstream's time.
	if ms, err := strconv.Atoi(resp.Header.Get("X-Envoy-Upstream-Service-Time")); err != nil || ms >= 150 {
		t.Errorf("x-envoy-upstream-service-time %q after a 150 ms fault delay; want the upstream's time alone", resp.Header.Get("X-Envoy-Upstream-Service-Time"))
	}
	if resp, _ := l.get(t, "/other"); resp.StatusCode != 200 {
		t.Error("a route without a fault override was faulted by the empty filter config")
	}
	if l.store.Value("http.lab.fault.delays_injected") != 1 {
		t.Errorf("delays_injected = %d", l.store.Value("http.lab.fault.delays_injected"))
	}
	var di, fi bool
	for _, line := range l.waitLines(t, 402) {
		di = di || strings.Contains(line, `"GET /delay HTTP/1.1" 200 DI `)
		fi = fi || strings.Contains(line, `"GET /abort HTTP/1.1" 503 FI `)
	}
	if !di || !fi {
		t.Errorf("access log lacks DI (%v) or FI (%v) lines", di, fi)
	}
}

func TestMirrorSendsAShadowCopy(t *testing.T) {
	shadowHost := make(chan string, 1)
	main := backend(t, "main", nil)
	shadow := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		shadowHost <- r.Host + " " + string(b)
	})
	l := newLab(t, []*cluster.Config{staticCluster(t, "main", main), staticCluster(t, "shadow", shadow)},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "main"},
			RequestMirrorPolicies: []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "shadow"}}}))
	resp, err := l.client.Post("http://"+l.addr+"/m", "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "main" {
		t.Errorf("primary answered %q", b)
	}
	select {
	case got := <-shadowHost:
		want := strings.Replace(l.addr, ":", "-shadow:", 1) + " payload"
		if got != want {
			t.Errorf("shadow saw %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("shadow got nothing")
	}
}

func TestRewritesRedirectsAndHeaderMutations(t *testing.T) {
	echo := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Secret", "1")
		w.Header().Set("X-Keep", "upstream")
		io.WriteString(w, r.Host+" "+r.RequestURI+" orig="+r.Header.Get("X-Envoy-Original-Path")+" add="+strings.Join(r.Header.Values("X-Add"), ",")+" set="+r.Header.Get("X-Set")+" gone="+r.Header.Get("X-Gone"))
	})
	pr := routeTo(prefix("/api/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "echo"}, PrefixRewrite: "/v2/", HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "internal"}})
	pr.RequestHeadersToAdd = []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "x-add", Value: "route"}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
		{Header: &corev3.HeaderValue{Key: "x-set", Value: "route"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
	}
	pr.RequestHeadersToRemove = []string{"x-gone"}
	pr.ResponseHeadersToRemove = []string{"x-secret"}
	pr.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-keep", Value: "route"}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT}}
	rr := routeTo(prefix("/re/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "echo"},
		RegexRewrite: &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^/re/([a-z]+)/(\\d+)$"}, Substitution: "/\\2/\\1"}})
	redirect := &routev3.Route{Match: prefix("/old/"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
		SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}, HostRedirect: "new.example",
		PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/new/"}, ResponseCode: routev3.RedirectAction_TEMPORARY_REDIRECT}}}
	l := newLab(t, []*cluster.Config{staticCluster(t, "echo", echo)}, pr, rr, redirect)

	resp, body := l.get(t, "/api/items?q=1", "X-Add", "client", "X-Set", "client", "X-Gone", "x")
	if want := "internal /v2/items?q=1 orig=/api/items?q=1 add=client,route set=route gone="; body != want {
		t.Errorf("prefix rewrite and request headers:\n got %q\nwant %q", body, want)
	}
	if resp.Header.Get("X-Secret") != "" || resp.Header.Get("X-Keep") != "upstream" {
		t.Errorf("response header mutations: %v", resp.Header)
	}
	if _, body := l.get(t, "/re/abc/42?x=y"); !strings.HasPrefix(body, l.addr+" /42/abc?x=y ") {
		t.Errorf("regex rewrite: %q", body)
	}
	l.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if resp, _ := l.get(t, "/old/page?a=1"); resp.StatusCode != 307 || resp.Header.Get("Location") != "https://new.example/new/page?a=1" {
		t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestRetryHostPredicateAvoidsPreviousHostsAndConnectFailureRetries(t *testing.T) {
	good := backend(t, "good", nil)
	bad := backend(t, "", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	dead := testutil.RefusingAddr(t).String()
	predicate := []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts"}}
	l := newLab(t, []*cluster.Config{staticCluster(t, "mixed", good, bad), staticCluster(t, "deadfirst", dead, good)},
		routeTo(prefix("/mixed"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "mixed"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{503}, NumRetries: wrapperspb.UInt32(1),
				RetryHostPredicate: predicate, HostSelectionRetryMaxAttempts: 5}}),
		routeTo(prefix("/dead"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "deadfirst"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure", NumRetries: wrapperspb.UInt32(1), RetryHostPredicate: predicate, HostSelectionRetryMaxAttempts: 5}}))
	for i := 0; i < 50; i++ {
		if resp, body := l.get(t, "/mixed"); resp.StatusCode != 200 || body != "good" {
			t.Fatalf("request %d: %d %q; one retry on another host should always reach the good one", i, resp.StatusCode, body)
		}
		if resp, body := l.get(t, "/dead"); resp.StatusCode != 200 || body != "good" {
			t.Fatalf("request %d to a cluster with a dead host: %d %q", i, resp.StatusCode, body)
		}
	}
	if l.store.Value("cluster.deadfirst.upstream_cx_connect_fail") == 0 || l.store.Value("cluster.deadfirst.upstream_rq_retry") != l.store.Value("cluster.deadfirst.upstream_cx_connect_fail") {
		t.Errorf("connect failures %d, retries %d", l.store.Value("cluster.deadfirst.upstream_cx_connect_fail"), l.store.Value("cluster.deadfirst.upstream_rq_retry"))
	}
}

func TestAccessLogResponseFlagsForLocalReplies(t *testing.T) {
	dead := testutil.RefusingAddr(t).String()
	up := backend(t, "up", nil)
	l := newLab(t, []*cluster.Config{staticCluster(t, "dead", dead), staticCluster(t, "empty"), staticCluster(t, "up", up)},
		routeTo(prefix("/dead"), to("dead")), routeTo(prefix("/empty"), to("empty")), routeTo(prefix("/up"), to("up")))
	l.get(t, "/nothing")
	l.get(t, "/dead")
	l.get(t, "/empty")
	l.get(t, "/up", "User-Agent", "tester", "X-Request-Id", "rid-1")
	lines := l.waitLines(t, 4)
	for i, want := range []string{
		`"GET /nothing HTTP/1.1" 404 NR 0 0 `,
		`"GET /dead HTTP/1.1" 503 UF 0 91 `,
		`"GET /empty HTTP/1.1" 503 UH 0 19 `,
		`"GET /up HTTP/1.1" 200 - 0 2 `,
	} {
		if i >= len(lines) || !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i%len(lines)], want)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, `"tester" "rid-1" "`+l.addr+`" "`+up+`"`) {
		t.Errorf("default format tail: %q", last)
	}
}

// TestRequestAttemptCount: a virtual host with include_request_attempt_count sends each
// upstream attempt its 1-based number in x-envoy-attempt-count, retries included.
func TestRequestAttemptCount(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var n atomic.Int64
	flaky := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("x-envoy-attempt-count"))
		mu.Unlock()
		if n.Add(1) == 1 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	})
	l := newLabHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.GetRouteConfig().VirtualHosts[0].IncludeRequestAttemptCount = true
	}, []*cluster.Config{staticCluster(t, "flaky", flaky)},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "flaky"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)}}))
	if resp, _ := l.get(t, "/"); resp.StatusCode != 200 {
		t.Fatalf("status %d after a retry", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "1" || seen[1] != "2" {
		t.Errorf("x-envoy-attempt-count per attempt = %q, want [1 2]", seen)
	}
	l2 := newLab(t, []*cluster.Config{staticCluster(t, "flaky", flaky)},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "flaky"}}))
	mu.Unlock()
	l2.get(t, "/")
	mu.Lock()
	if last := seen[len(seen)-1]; last != "" {
		t.Errorf("without include_request_attempt_count the upstream saw x-envoy-attempt-count %q", last)
	}
}
