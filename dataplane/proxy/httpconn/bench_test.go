package httpconn

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	alpnv2 "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// BenchmarkForward measures one keep-alive request through the HCM to a loopback
// backend. "istio" and "envoy-default": fault filter, access log, header match, retry
// policy. "istio-sidecar": an outbound sidecar's HCM as istiod sends it for the data-path
// benchmark (e2e BenchmarkDataPath): istio.alpn, peer_metadata, istio.stats, fault and
// router filters, normalize_path, no access log, no route timeout, Istio's default retry policy, and a
// backend answering 1 KB with its peer metadata, as the server's sidecar does.
// Run: go test ./dataplane/proxy/httpconn -run '^$' -bench Forward -benchmem
func BenchmarkForward(b *testing.B) {
	// "istio": stream_idle_timeout 0, as istiod and meshlab's generator send on every HCM;
	// "envoy-default": the field unset, so Envoy's 5m stream idle timer runs per request.
	// "istio-per-try": "istio" with a VirtualService's retries.perTryTimeout (2 s), the
	// router's per-try timer on every attempt.
	istio := func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) }
	for _, bc := range []struct {
		name   string
		mutate func(*hcmv3.HttpConnectionManager)
		perTry time.Duration
	}{
		{"istio", istio, 0},
		{"envoy-default", nil, 0},
		{"istio-per-try", istio, 2 * time.Second},
	} {
		b.Run(bc.name, func(b *testing.B) { benchmarkForward(b, bc.mutate, bc.perTry) })
	}
	b.Run("istio-sidecar", func(b *testing.B) { benchmarkSidecar(b, false) })
	b.Run("istio-sidecar-mtls", func(b *testing.B) { benchmarkSidecar(b, true) })
}

func benchmarkForward(b *testing.B, mutate func(*hcmv3.HttpConnectionManager), perTry time.Duration) {
	b.Helper()
	up := backend(b, "up", nil)
	m := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{present("x-absent", false, false)}}
	retry := &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)}
	if perTry > 0 {
		retry.PerTryTimeout = durationpb.New(perTry)
	}
	l := newLabHCM(b, mutate, []*cluster.Config{staticCluster(b, "up", up)},
		routeTo(m, &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "up"},
			RetryPolicy: retry}))
	req, _ := http.NewRequest("GET", "http://"+l.addr+"/", nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := l.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// sidecarPrincipal is the server sidecar's identity under mTLS.
const sidecarPrincipal = "spiffe://cluster.local/ns/default/sa/server"

// sidecarNode is a pod's node as the agent's bootstrap describes it (peer metadata).
func sidecarNode(tb testing.TB, pod, app string) *corev3.Node {
	tb.Helper()
	md, err := structpb.NewStruct(map[string]any{
		"NAME": pod, "NAMESPACE": "default", "CLUSTER_ID": "Kubernetes", "WORKLOAD_NAME": app,
		"OWNER":  "kubernetes://apis/apps/v1/namespaces/default/deployments/" + app,
		"LABELS": map[string]any{"app": app, peer.LabelCanonicalName: app, peer.LabelCanonicalRevision: "latest"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &corev3.Node{Id: "sidecar~10.244.0.9~" + pod + ".default~default.svc.cluster.local", Metadata: md}
}

func typedStructAny(tb testing.TB, typ string, v map[string]any) *anypb.Any {
	tb.Helper()
	s, err := structpb.NewStruct(v)
	if err != nil {
		tb.Fatal(err)
	}
	return mustAny(tb, &udpav1.TypedStruct{TypeUrl: "type.googleapis.com/" + typ, Value: s})
}

// benchmarkSidecar is "istio-sidecar"; mtls sends to the backend over TLS, the backend
// presenting a SPIFFE certificate as the server's sidecar does under ISTIO_MUTUAL (no
// client certificate: the proxy's side of the handshake is not what is measured).
func benchmarkSidecar(b *testing.B, mtls bool) {
	b.Helper()
	l := newSidecarLab(b, mtls)
	req, _ := http.NewRequest("GET", "http://"+l.addr+"/bytes/1024", nil)
	req.Header.Set("User-Agent", "fortio.org/fortio-1.69.1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := l.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n != 1024 || resp.Header.Get(peer.HeaderMetadata) != "" {
			b.Fatalf("answer %d, %d bytes, peer metadata %q: want 200, 1024 bytes and the exchange headers removed",
				resp.StatusCode, n, resp.Header.Get(peer.HeaderMetadata))
		}
	}
	b.StopTimer()
	checkSidecarStats(b, l, mtls)
}

// newSidecarLab is the "istio-sidecar" proxy: an outbound sidecar's HCM as istiod sends it,
// in front of a backend answering 1 KB with the server sidecar's peer metadata.
func newSidecarLab(b *testing.B, mtls bool) *lab {
	b.Helper()
	return newSidecarLabWith(b, mtls, nil)
}

// newSidecarLabWith is newSidecarLab with extra applied to the HCM last.
func newSidecarLabWith(b *testing.B, mtls bool, extra func(*hcmv3.HttpConnectionManager)) *lab {
	b.Helper()
	// The server's sidecar answers with its own metadata; the local node (process-wide)
	// is the client's.
	peer.SetLocal(sidecarNode(b, "server-0", "server"))
	server := peer.Local()
	peer.SetLocal(sidecarNode(b, "client-0", "client"))
	b.Cleanup(func() { peer.SetLocal(&corev3.Node{}) })
	body := strings.Repeat("x", 1024)
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(peer.HeaderMetadata) == "" {
			http.Error(w, "no peer metadata", http.StatusBadRequest)
			return
		}
		w.Header().Set(peer.HeaderMetadata, server.Header)
		w.Header().Set(peer.HeaderMetadataID, server.ID)
		w.Header().Set("Content-Length", "1024")
		_, _ = io.WriteString(w, body)
	}
	const name = "outbound|8080||server.default.svc.cluster.local"
	var upstream *cluster.Config
	if mtls {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(handler))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{spiffeCert(b, sidecarPrincipal)}}
		srv.StartTLS()
		b.Cleanup(srv.Close)
		upstream = tlsCluster(b, name, srv.Listener.Addr().String(), "")
	} else {
		upstream = staticCluster(b, name, backend(b, "", handler))
	}
	alpn := &alpnv2.FilterConfig{AlpnOverride: []*alpnv2.FilterConfig_AlpnOverride{
		{UpstreamProtocol: alpnv2.FilterConfig_HTTP10, AlpnOverride: []string{"istio-http/1.0", "istio", "http/1.0"}},
		{UpstreamProtocol: alpnv2.FilterConfig_HTTP11, AlpnOverride: []string{"istio-http/1.1", "istio", "http/1.1"}},
		{UpstreamProtocol: alpnv2.FilterConfig_HTTP2, AlpnOverride: []string{"istio-h2", "istio", "h2"}},
	}}
	mutate := func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(0)
		h.NormalizePath = wrapperspb.Bool(true) // Istio's default path normalization, BASE
		h.AccessLog = nil
		h.HttpFilters = []*hcmv3.HttpFilter{
			{Name: ALPNFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, alpn)}},
			{Name: "istio.metadata_exchange", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: typedStructAny(b, peer.PeerMetadataConfigType, map[string]any{
				"upstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
				"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{"skip_external_clusters": true}}},
			})}},
			{Name: "istio.stats", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: typedStructAny(b, istiostats.ConfigType, map[string]any{})}},
			{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &routerv3.Router{})}},
		}
		if extra != nil {
			extra(h)
		}
	}
	l := newLabHCM(b, mutate, []*cluster.Config{upstream},
		routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name},
			Timeout: durationpb.New(0),
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
				NumRetries: wrapperspb.UInt32(2)}}))
	return l
}

// checkSidecarStats fails b unless the sidecar recorded istio_requests_total with its peer.
func checkSidecarStats(b *testing.B, l *lab, mtls bool) {
	b.Helper()
	var prom strings.Builder
	if err := l.store.WritePrometheus(&prom, stats.Filter{}); err != nil {
		b.Fatal(err)
	}
	// The client's sidecar reports its peer, learnt from the answer's metadata.
	want := `destination_workload="server"`
	if mtls {
		want = `destination_principal="` + sidecarPrincipal + `"`
	}
	if !strings.Contains(prom.String(), want) || !strings.Contains(prom.String(), "istio_requests_total{") {
		b.Fatalf("istio_requests_total with %s not recorded:\n%s", want, prom.String())
	}
}
