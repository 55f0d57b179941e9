package listener

import (
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

// TestHTTP2OverMutualTLSByALPN sends HTTP/1.1 to a client proxy whose cluster speaks
// HTTP/2 upstream over mTLS offering Istio's h2 ALPN; the server proxy's chain
// advertises ["h2","http/1.1"], so its HCM (codec AUTO) serves the stream as HTTP/2 and
// still sees the TLS state (x-forwarded-client-cert).
func TestHTTP2OverMutualTLSByALPN(t *testing.T) {
	ca := tlstest.NewCA(t)
	server := newProxyUnderTest(t, ca, backendID)
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon([]string{"h2", "http/1.1"}, tlstest.Prefix("spiffe://cluster.local/")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	server.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|8080||", headerEcho(t), nil)})
	inbound, _ := server.listen(t, &listenerv3.Listener{Name: "inbound", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{TransportSocket: down, Filters: routeHCM(t, "inbound|8080||", filepath.Join(t.TempDir(), "in.log"), istioInboundXFCC)}}})

	client := newProxyUnderTest(t, ca, frontendID)
	up := staticCluster(t, "outbound|8080||backend", inbound, tlstest.Socket(t, &tlsv3.UpstreamTlsContext{
		CommonTlsContext: tlstest.IstioCommon([]string{"istio-h2", "istio", "h2"}, tlstest.Exact(backendID))}))
	// HTTP/2 upstream as Istio asks for it: explicit http2 in the upstream HTTP protocol options.
	up.Proto.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(t, &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}})}
	up, err := cluster.Compile(up.Proto)
	if err != nil {
		t.Fatal(err)
	}
	client.clusters.AddStatic([]*cluster.Config{up})
	out, _ := client.listen(t, &listenerv3.Listener{Name: "out", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "outbound|8080||backend", filepath.Join(t.TempDir(), "out.log"))}}})

	if got := httpGet(t, out.String()); !strings.HasPrefix(got, "http By="+backendID) || !strings.HasSuffix(got, "URI="+frontendID) {
		var b strings.Builder
		_ = server.stats.WriteText(&b, stats.Filter{})
		t.Fatalf("backend saw %q, want x-forwarded-proto http and an XFCC\n%s", got, b.String())
	}
	waitStat(t, server.stats, "http.outbound.downstream_cx_http2_total", 1)
	waitStat(t, client.stats, "cluster.outbound|8080||backend.upstream_cx_http2_total", 1)
	waitStat(t, client.stats, "http.outbound.downstream_cx_http1_total", 1)
}
