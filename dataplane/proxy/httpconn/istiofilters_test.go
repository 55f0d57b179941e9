package httpconn

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	grpcstatsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	alpnv2 "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// istioFilters puts Istio's grpc_stats, istio.alpn and cors filters (as istiod builds
// them) before the HCM's fault and router filters.
func istioFilters(t *testing.T) func(*hcmv3.HttpConnectionManager) {
	t.Helper()
	return func(h *hcmv3.HttpConnectionManager) {
		alpn := &alpnv2.FilterConfig{AlpnOverride: []*alpnv2.FilterConfig_AlpnOverride{
			{UpstreamProtocol: alpnv2.FilterConfig_HTTP10, AlpnOverride: []string{"istio-http/1.0", "istio", "http/1.0"}},
			{UpstreamProtocol: alpnv2.FilterConfig_HTTP11, AlpnOverride: []string{"istio-http/1.1", "istio", "http/1.1"}},
			{UpstreamProtocol: alpnv2.FilterConfig_HTTP2, AlpnOverride: []string{"istio-h2", "istio", "h2"}},
		}}
		pre := []*hcmv3.HttpFilter{
			{Name: GRPCStatsFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &grpcstatsv3.FilterConfig{
				EmitFilterState: true, PerMethodStatSpecifier: &grpcstatsv3.FilterConfig_StatsForAllMethods{StatsForAllMethods: wrapperspb.Bool(false)}})}},
			{Name: ALPNFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, alpn)}},
			{Name: CORSFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &corsv3.Cors{})}},
		}
		h.HttpFilters = append(pre, h.HttpFilters...)
	}
}

// alpnServer is a TLS backend recording the ALPN protocols each client offered.
func alpnServer(t *testing.T) (string, func() [][]string) {
	t.Helper()
	var mu sync.Mutex
	var offered [][]string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	srv.TLS = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		offered = append(offered, append([]string(nil), h.SupportedProtos...))
		mu.Unlock()
		return nil, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return append([][]string(nil), offered...)
	}
}

func tlsCluster(tb testing.TB, name, host string, alpnOverride string) *cluster.Config {
	tb.Helper()
	base := staticCluster(tb, name, host)
	c := base.Proto
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(tb, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"istio-peer-exchange", "istio", "http/1.1"}}})}}
	if alpnOverride != "" {
		md, err := structpb.NewStruct(map[string]any{"alpn_override": alpnOverride})
		if err != nil {
			tb.Fatal(err)
		}
		c.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": md}}
	}
	cfg, err := cluster.Compile(c)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func TestIstioALPNOverridesTheUpstreamALPNPerProtocol(t *testing.T) {
	for _, tc := range []struct {
		name     string
		filters  bool
		metadata string
		want     string
	}{
		{name: "istio.alpn offers istio-http/1.1 for an HTTP/1.1 upstream", filters: true, want: "istio-http/1.1,istio,http/1.1"},
		{name: "without istio.alpn the cluster's alpn_protocols", filters: false, want: "istio-peer-exchange,istio,http/1.1"},
		{name: "istio metadata alpn_override false keeps the cluster's", filters: true, metadata: "false", want: "istio-peer-exchange,istio,http/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, offered := alpnServer(t)
			var mutate func(*hcmv3.HttpConnectionManager)
			if tc.filters {
				mutate = istioFilters(t)
			}
			l := newLabHCM(t, mutate, []*cluster.Config{tlsCluster(t, "outbound|443||tls", host, tc.metadata)}, routeTo(prefix("/"), to("outbound|443||tls")))
			if resp, body := l.get(t, "/"); resp.StatusCode != 200 || body != "tls" {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			got := offered()
			if len(got) != 1 || strings.Join(got[0], ",") != tc.want {
				t.Errorf("offered ALPN %v, want [%s]", got, tc.want)
			}
		})
	}
}

func TestGRPCStatsCountsSuccessAndFailureByGrpcStatus(t *testing.T) {
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // a gRPC server reads the request message first
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = w.Write([]byte{0, 0, 0, 0, 1, 'x', 0, 0, 0, 0, 0}) // two messages
		if strings.HasSuffix(r.URL.Path, "/Fail") {
			w.Header().Set("Grpc-Status", "14")
		} else {
			w.Header().Set("Grpc-Status", "0")
		}
	})
	l := newLabHCM(t, istioFilters(t), []*cluster.Config{staticCluster(t, "grpc", up)}, routeTo(prefix("/"), to("grpc")))
	call := func(method string) {
		req, _ := http.NewRequest("POST", "http://"+l.addr+"/pkg.Svc/"+method, strings.NewReader("\x00\x00\x00\x00\x00"))
		req.Header.Set("Content-Type", "application/grpc")
		resp, err := l.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	call("Ok")
	call("Ok")
	call("Fail")
	// A plain HTTP request is not gRPC: not counted.
	l.get(t, "/plain")
	for name, want := range map[string]int64{"cluster.grpc.grpc.success": 2, "cluster.grpc.grpc.failure": 1, "cluster.grpc.grpc.total": 3,
		"cluster.grpc.grpc.request_message_count": 3, "cluster.grpc.grpc.response_message_count": 6} {
		if got := l.store.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

func TestCORSPolicyAnswersPreflightsAndDecoratesResponses(t *testing.T) {
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream "+r.Method) })
	policy := &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://app.example.com"}}},
		AllowMethods:           "GET,POST", AllowHeaders: "x-custom", ExposeHeaders: "x-trace", MaxAge: "600",
		AllowCredentials: wrapperspb.Bool(true),
	}
	rt := routeTo(prefix("/"), to("up"))
	rt.TypedPerFilterConfig = map[string]*anypb.Any{CORSFilterName: mustAny(t, policy)}
	l := newLabHCM(t, istioFilters(t), []*cluster.Config{staticCluster(t, "up", up)}, rt)

	preflight := func(origin string) (*http.Response, string) {
		req, _ := http.NewRequest("OPTIONS", "http://"+l.addr+"/x", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := l.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := preflight("https://app.example.com")
	if resp.StatusCode != 200 || body != "" {
		t.Errorf("allowed preflight: %d %q, want an empty 200 from the proxy", resp.StatusCode, body)
	}
	for k, want := range map[string]string{"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "GET,POST",
		"Access-Control-Allow-Headers": "x-custom", "Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("preflight %s = %q, want %q", k, got, want)
		}
	}
	if resp, body := preflight("https://evil.example.com"); body != "upstream OPTIONS" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a preflight from another origin is forwarded untouched: %q %v", body, resp.Header)
	}
	resp, body = l.get(t, "/x", "Origin", "https://app.example.com")
	if body != "upstream GET" || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || resp.Header.Get("Access-Control-Expose-Headers") != "x-trace" {
		t.Errorf("simple request: %q %v", body, resp.Header)
	}
	resp, _ = l.get(t, "/x", "Origin", "https://evil.example.com")
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin got access-control-allow-origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestVirtualHostPerFilterConfigAppliesToRoutesWithoutTheirOwn(t *testing.T) {
	vhPolicy := mustAny(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://vh"}}}})
	routePolicy := mustAny(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://route"}}}})
	own := routeTo(prefix("/own"), to("c"))
	own.TypedPerFilterConfig = map[string]*anypb.Any{CORSFilterName: routePolicy}
	tb, err := CompileRoutes(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, TypedPerFilterConfig: map[string]*anypb.Any{CORSFilterName: vhPolicy},
		Routes: []*routev3.Route{own, routeTo(prefix("/"), to("c"))},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	_, r := tb.Match("x", "/own")
	if r.CORS == nil || !r.CORS.allows("https://route") || r.CORS.allows("https://vh") {
		t.Errorf("a route with its own policy: %+v", r.CORS)
	}
	_, r = tb.Match("x", "/other")
	if r.CORS == nil || !r.CORS.allows("https://vh") {
		t.Errorf("a route without a policy does not inherit the virtual host's: %+v", r.CORS)
	}
}

func TestGRPCFramesCountsMessagesSplitAcrossReads(t *testing.T) {
	st := stats.NewStore()
	c := st.Cluster("c").Counter("grpc.request_message_count")
	f := &grpcFrames{counter: c}
	stream := []byte{0, 0, 0, 0, 3, 'a', 'b', 'c', 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 'x', 'y'}
	for i := range stream { // one byte at a time: headers and payloads split anywhere
		f.scan(stream[i : i+1])
	}
	if got := c.Value(); got != 3 {
		t.Errorf("messages = %d, want 3", got)
	}
}
