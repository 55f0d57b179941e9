package listener

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

// connFieldsFormat logs the connection fields the listener and the clusters fill.
const connFieldsFormat = "%RESPONSE_CODE% %FILTER_CHAIN_NAME% %REQUESTED_SERVER_NAME% %UPSTREAM_LOCAL_ADDRESS% %UPSTREAM_TRANSPORT_FAILURE_REASON%\n"

func logFormat(t *testing.T, format string) func(*hcmv3.HttpConnectionManager) {
	t.Helper()
	return func(h *hcmv3.HttpConnectionManager) {
		var f filev3.FileAccessLog
		if err := h.AccessLog[0].GetTypedConfig().UnmarshalTo(&f); err != nil {
			t.Fatal(err)
		}
		f.AccessLogFormat = &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: format}}}}}
		h.AccessLog[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &f)}
	}
}

// waitLogLine polls path until a line matching ok appears and returns it.
func waitLogLine(t *testing.T, path string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(data), "\n") {
			if ok(l) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log %s:\n%s\nhas no expected line", path, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAccessLogConnectionFieldsOverMutualTLS pins what Envoy logs about connections: on
// the inbound side the matched filter chain's name and the SNI of the ClientHello (seen
// by tls_inspector), on the outbound side the proxy's end of the upstream connection,
// and for a certificate the upstream TLS context refuses, the transport failure reason.
func TestAccessLogConnectionFieldsOverMutualTLS(t *testing.T) {
	const sni = "outbound_.8080_._.backend.default.svc.cluster.local"
	ca := tlstest.NewCA(t)
	server := newProxyUnderTest(t, ca, backendID)
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon([]string{"istio-http/1.1", "http/1.1"}, tlstest.Prefix("spiffe://cluster.local/")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	server.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|8080||", headerEcho(t), nil)})
	inLog := filepath.Join(t.TempDir(), "in.log")
	inbound, _ := server.listen(t, &listenerv3.Listener{Name: "inbound", Address: addr("127.0.0.1", 0), ListenerFilters: tlsInspector(t),
		FilterChains: []*listenerv3.FilterChain{{Name: "0.0.0.0_8080", TransportSocket: down,
			FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "tls"},
			Filters:          routeHCM(t, "inbound|8080||", inLog, logFormat(t, connFieldsFormat))}}})

	client := newProxyUnderTest(t, ca, frontendID)
	upstream := func(san string) *corev3.TransportSocket {
		return tlstest.Socket(t, &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: tlstest.IstioCommon([]string{"istio-http/1.1", "istio"}, tlstest.Exact(san))})
	}
	client.clusters.AddStatic([]*cluster.Config{
		staticCluster(t, "outbound|8080||backend", inbound, upstream(backendID)),
		staticCluster(t, "outbound|8080||impostor", inbound, upstream("spiffe://cluster.local/ns/default/sa/reviews")),
	})
	outLog := filepath.Join(t.TempDir(), "out.log")
	good, _ := client.listen(t, &listenerv3.Listener{Name: "good", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "outbound|8080||backend", outLog, logFormat(t, connFieldsFormat))}}})
	wrong, _ := client.listen(t, &listenerv3.Listener{Name: "wrong", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "outbound|8080||impostor", outLog, logFormat(t, connFieldsFormat))}}})

	httpGet(t, good.String())
	httpGet(t, wrong.String())

	in := waitLogLine(t, inLog, func(l string) bool { return strings.HasPrefix(l, "200 ") })
	if want := "200 0.0.0.0_8080 " + sni + " 127.0.0.1:"; !strings.HasPrefix(in, want) || !strings.HasSuffix(in, " -") {
		t.Errorf("inbound line %q, want %q<port> -", in, want)
	}
	out := waitLogLine(t, outLog, func(l string) bool { return strings.HasPrefix(l, "200 ") })
	if f := strings.Fields(out); len(f) != 5 || f[1] != "-" || f[2] != "-" || !strings.HasPrefix(f[3], "127.0.0.1:") || f[3] == inbound.String() || f[4] != "-" {
		t.Errorf("outbound line %q, want an unnamed plaintext chain and the upstream local address", out)
	}
	failed := waitLogLine(t, outLog, func(l string) bool { return strings.HasPrefix(l, "503 ") })
	if want := "503 - - - TLS_error:|268435581:SSL_routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:verify_cert_failed:_verify_SAN_list:TLS_error_end"; failed != want {
		t.Errorf("failed line\n got %q\nwant %q", failed, want)
	}
}
