package listener

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

// routeHCM routes every request to cluster and logs flags and details to logPath.
func routeHCM(t *testing.T, cluster, logPath string, mutate ...func(*hcmv3.HttpConnectionManager)) []*listenerv3.Filter {
	t.Helper()
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "outbound",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}}}},
		}},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{
			Path: logPath,
			AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%\n"}},
			}}},
		})}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
	}
	for _, m := range mutate {
		m(h)
	}
	return []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)}}}
}

// headerEcho answers every request with its x-forwarded-client-cert and
// x-forwarded-proto headers.
func headerEcho(t *testing.T) netip.AddrPort {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("X-Forwarded-Proto")+" "+r.Header.Get("X-Forwarded-Client-Cert"))
	}))
	t.Cleanup(srv.Close)
	return netip.MustParseAddrPort(srv.Listener.Addr().String())
}

// istioInboundXFCC is how Istio sets x-forwarded-client-cert on inbound HCMs.
func istioInboundXFCC(h *hcmv3.HttpConnectionManager) {
	h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_APPEND_FORWARD
	h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: wrapperspb.Bool(true), Dns: true, Uri: true}
}

// TestHTTPOverMutualTLS sends HTTP/1.1 through a client proxy whose cluster originates
// mTLS with Istio's ALPN to a server proxy's TLS chain, whose HCM sets
// x-forwarded-client-cert as Envoy does for Istio (APPEND_FORWARD); a cluster verifying the wrong SAN
// answers 503 with response flag UF and Envoy's TLS error detail.
func TestHTTPOverMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t)
	server := newProxyUnderTest(t, ca, backendID)
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon([]string{"istio-http/1.1", "http/1.1"}, tlstest.Prefix("spiffe://cluster.local/")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	server.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|8080||", headerEcho(t), nil)})
	inbound, _ := server.listen(t, &listenerv3.Listener{Name: "inbound", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{TransportSocket: down, Filters: routeHCM(t, "inbound|8080||", filepath.Join(t.TempDir(), "in.log"), istioInboundXFCC)}}})

	client := newProxyUnderTest(t, ca, frontendID)
	upstream := func(san string) *corev3.TransportSocket {
		return tlstest.Socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: tlstest.IstioCommon([]string{"istio-http/1.1", "istio"}, tlstest.Exact(san))})
	}
	client.clusters.AddStatic([]*cluster.Config{
		staticCluster(t, "outbound|8080||backend", inbound, upstream(backendID)),
		staticCluster(t, "outbound|8080||impostor", inbound, upstream("spiffe://cluster.local/ns/default/sa/reviews")),
	})
	logPath := filepath.Join(t.TempDir(), "access.log")
	good, _ := client.listen(t, &listenerv3.Listener{Name: "good", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "outbound|8080||backend", logPath)}}})
	wrong, _ := client.listen(t, &listenerv3.Listener{Name: "wrong", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "outbound|8080||impostor", logPath)}}})

	// x-forwarded-proto stays as the client proxy set it (not an edge proxy). As Envoy
	// for Istio: By is the server's identity, Hash the client certificate's
	// SHA-256, Subject empty for a SPIFFE certificate, URI the client's identity.
	got := httpGet(t, good.String())
	want := regexp.MustCompile(`^http By=` + regexp.QuoteMeta(backendID) + `;Hash=[0-9a-f]{64};Subject="";URI=` + regexp.QuoteMeta(frontendID) + `$`)
	if !want.MatchString(got) {
		t.Fatalf("backend saw x-forwarded-proto and x-forwarded-client-cert %q, want %s", got, want)
	}
	if got := httpGet(t, wrong.String()); !strings.HasPrefix(got, "upstream connect error or disconnect/reset before headers") {
		t.Fatalf("through the wrong SAN: %q", got)
	}
	waitStat(t, client.stats, "cluster.outbound|8080||impostor.ssl.fail_verify_san", 1)
	wantLog := "503 UF upstream_reset_before_response_started{connection_failure,TLS_error:|268435581:SSL_routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end}"
	deadline := time.Now().Add(5 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		if strings.Contains(string(log), wantLog) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log:\n%s\nwant a line %q", log, wantLog)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
