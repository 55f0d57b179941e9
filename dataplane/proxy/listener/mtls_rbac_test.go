package listener

import (
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	tlsinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	rawv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

const reviewsID = "spiffe://cluster.local/ns/default/sa/reviews"

// autoMTLSCluster is an Istio auto-mTLS cluster (tlsMode-istio, then tlsMode-disabled)
// with one endpoint, labelled tlsMode: istio when sidecar is true.
func autoMTLSCluster(t *testing.T, name string, to netip.AddrPort, sidecar bool) *cluster.Config {
	t.Helper()
	match, _ := structpb.NewStruct(map[string]any{"tlsMode": "istio"})
	lb := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr(to.Addr().String(), uint32(to.Port()))}}}
	if sidecar {
		lb.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{cluster.SocketMatchFilter: match}}
	}
	cfg, err := cluster.Compile(&clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
			{Name: "tlsMode-istio", Match: match, TransportSocket: tlstest.Socket(t, &tlsv3.UpstreamTlsContext{
				Sni:              "outbound_.8080_._.backend.default.svc.cluster.local",
				CommonTlsContext: tlstest.IstioCommon([]string{"istio-peer-exchange", "istio"}, tlstest.Exact(backendID)),
			})},
			{Name: "tlsMode-disabled", Match: &structpb.Struct{}, TransportSocket: &corev3.TransportSocket{
				Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &rawv3.RawBuffer{})},
			}},
		},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{lb}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func principalIs(id string) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: tlstest.Exact(id)}}}
}

var anyPermission = &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}

func tlsInspector(t *testing.T) []*listenerv3.ListenerFilter {
	t.Helper()
	return []*listenerv3.ListenerFilter{{Name: tlsctx.InspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspv3.TlsInspector{})}}}
}

// TestAutoMTLSToStrictInboundWithNetworkRBAC runs Istio's auto-mTLS: an endpoint
// labelled tlsMode: istio gets mTLS, one without the label plaintext; the server's
// STRICT-like listener has only a TLS chain, so the plaintext connection matches no
// chain and is closed; the TLS chain's network RBAC allows only the frontend identity.
func TestAutoMTLSToStrictInboundWithNetworkRBAC(t *testing.T) {
	ca := tlstest.NewCA(t)
	server := newProxyUnderTest(t, ca, backendID)
	server.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|9000||", tagServer(t, "via-mtls-chain"), nil)})
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon(nil, tlstest.Prefix("spiffe://")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	netRBAC := &listenerv3.Filter{Name: "envoy.filters.network.rbac", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &netrbacv3.RBAC{
		StatPrefix: "tcp.",
		Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
			"ns[default]-policy[frontend-only]-rule[0]": {Permissions: []*rbacv3.Permission{anyPermission}, Principals: []*rbacv3.Principal{principalIs(frontendID)}},
		}},
	})}}
	inbound, inCfg := server.listen(t, &listenerv3.Listener{Name: "virtualInbound", Address: addr("127.0.0.1", 0), ListenerFilters: tlsInspector(t),
		FilterChains: []*listenerv3.FilterChain{{
			Name: "strict", TransportSocket: down, Filters: append([]*listenerv3.Filter{netRBAC}, tcpFilter(t, "inbound|9000||")...),
			FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "tls", ApplicationProtocols: []string{"istio-peer-exchange", "istio"}},
		}},
	})

	frontend := newProxyUnderTest(t, ca, frontendID)
	frontend.clusters.AddStatic([]*cluster.Config{
		autoMTLSCluster(t, "outbound|9000||sidecar", inbound, true),
		autoMTLSCluster(t, "outbound|9000||nosidecar", inbound, false),
	})
	viaSidecar, _ := frontend.listen(t, &listenerv3.Listener{Name: "sidecar", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "outbound|9000||sidecar")}}})
	viaPlain, _ := frontend.listen(t, &listenerv3.Listener{Name: "plain", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "outbound|9000||nosidecar")}}})
	reviews := newProxyUnderTest(t, ca, reviewsID)
	reviews.clusters.AddStatic([]*cluster.Config{autoMTLSCluster(t, "outbound|9000||sidecar", inbound, true)})
	viaReviews, _ := reviews.listen(t, &listenerv3.Listener{Name: "reviews", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "outbound|9000||sidecar")}}})

	if got := readAll(t, viaSidecar); got != "via-mtls-chain" {
		t.Fatalf("endpoint with tlsMode istio: %q, want via-mtls-chain", got)
	}
	waitStat(t, frontend.stats, "cluster.outbound|9000||sidecar.ssl.handshake", 1)
	waitStat(t, frontend.stats, "cluster.outbound|9000||sidecar.tlsMode-istio.total_match_count", 1)
	waitStat(t, server.stats, "tcp.rbac.allowed", 1)

	if got := readAll(t, viaPlain); got != "" {
		t.Fatalf("plaintext endpoint to a STRICT listener: %q, want the connection closed", got)
	}
	waitStat(t, frontend.stats, "cluster.outbound|9000||nosidecar.tlsMode-disabled.total_match_count", 1)
	waitStat(t, server.stats, "listener."+inCfg.StatName+".no_filter_chain_match", 1)
	if v := frontend.stats.Value("cluster.outbound|9000||nosidecar.ssl.handshake"); v != 0 {
		t.Fatalf("plaintext endpoint did %d TLS handshakes", v)
	}

	if got := readAll(t, viaReviews); got != "" {
		t.Fatalf("reviews identity through an ALLOW frontend-only policy: %q, want the connection closed", got)
	}
	waitStat(t, server.stats, "tcp.rbac.denied", 1)
	// Envoy's tcp_proxy connects upstream before network RBAC decides (on the first read,
	// which waits for that connection), so the denied connection counts upstream too.
	waitStat(t, server.stats, "cluster.inbound|9000||.upstream_cx_total", 2)
}

func httpRBAC(t *testing.T, action rbacv3.RBAC_Action, policies map[string]*rbacv3.Policy) *hcmv3.HttpFilter {
	t.Helper()
	return &hcmv3.HttpFilter{Name: "envoy.filters.http.rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &httprbacv3.RBAC{
		Rules: &rbacv3.RBAC{Action: action, Policies: policies},
	})}}
}

func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPRBACOnMutualTLSChain runs Istio's inbound HTTP filters: a DENY RBAC filter
// (path prefix /admin) then an ALLOW RBAC filter (GET from the frontend identity); a
// denied request gets Envoy's 403 "RBAC: access denied" with the matched policy in
// %RESPONSE_CODE_DETAILS%, and http.<prefix>.rbac.* count each filter's decisions.
func TestHTTPRBACOnMutualTLSChain(t *testing.T) {
	ca := tlstest.NewCA(t)
	server := newProxyUnderTest(t, ca, backendID)
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon([]string{"istio-http/1.1", "http/1.1"}, tlstest.Prefix("spiffe://")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	server.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|8080||", headerEcho(t), nil)})
	logPath := filepath.Join(t.TempDir(), "in.log")
	deny := httpRBAC(t, rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{"ns[default]-policy[no-admin]-rule[0]": {
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: tlstest.Prefix("/admin")}}}}},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
	}})
	allow := httpRBAC(t, rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"ns[default]-policy[frontend-get]-rule[0]": {
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{Name: ":method",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: tlstest.Exact("GET")}}}}},
		Principals: []*rbacv3.Principal{principalIs(frontendID)},
	}})
	inbound, _ := server.listen(t, &listenerv3.Listener{Name: "inbound", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{TransportSocket: down, Filters: routeHCM(t, "inbound|8080||", logPath, istioInboundXFCC, func(h *hcmv3.HttpConnectionManager) {
			h.StatPrefix = "inbound_0.0.0.0_8080"
			h.HttpFilters = append([]*hcmv3.HttpFilter{deny, allow}, h.HttpFilters...)
		})}}})

	client := newProxyUnderTest(t, ca, frontendID)
	client.clusters.AddStatic([]*cluster.Config{staticCluster(t, "outbound|8080||backend", inbound,
		tlstest.Socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: tlstest.IstioCommon([]string{"istio-http/1.1", "istio"}, tlstest.Exact(backendID))}))})
	out, _ := client.listen(t, &listenerv3.Listener{Name: "out", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "outbound|8080||backend", filepath.Join(t.TempDir(), "out.log"))}}})

	base := "http://" + out.String()
	if code, body := do(t, "GET", base+"/products?x=1"); code != 200 || !strings.Contains(body, "URI="+frontendID) {
		t.Fatalf("GET /products: %d %q, want 200 with the frontend's XFCC", code, body)
	}
	if code, body := do(t, "GET", base+"/admin/users"); code != 403 || body != "RBAC: access denied" {
		t.Fatalf("GET /admin/users: %d %q, want 403 RBAC: access denied", code, body)
	}
	if code, _ := do(t, "POST", base+"/products"); code != 403 {
		t.Fatalf("POST /products: %d, want 403", code)
	}
	// The DENY filter allowed 2 and denied 1; the ALLOW filter saw the 2 it let through.
	waitStat(t, server.stats, "http.inbound_0.0.0.0_8080.rbac.denied", 2)
	waitStat(t, server.stats, "http.inbound_0.0.0.0_8080.rbac.allowed", 3)
	want := []string{"200 - via_upstream", "403 - rbac_access_denied_matched_policy[ns[default]-policy[no-admin]-rule[0]]", "403 - rbac_access_denied_matched_policy[none]"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		if strings.Join(want, "\n")+"\n" == string(log) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log:\n%s\nwant:\n%s", log, strings.Join(want, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
