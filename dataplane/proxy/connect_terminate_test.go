package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonsfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	routercfg "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpsfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netsfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	internalv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	rawv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

func fsValue(key, factory, format string, share commonsfsv3.FilterStateValue_SharedWithUpstream) *commonsfsv3.FilterStateValue {
	return &commonsfsv3.FilterStateValue{
		Key:                &commonsfsv3.FilterStateValue_ObjectKey{ObjectKey: key},
		FactoryKey:         factory,
		Value:              &commonsfsv3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: format}}}}},
		SharedWithUpstream: share,
	}
}

// staticInternalCluster is a STATIC cluster whose one endpoint is internal listener
// listener, behind a plain internal_upstream transport (istiod's main_internal cluster).
func staticInternalCluster(tb testing.TB, name, listener string) *clusterv3.Cluster {
	tb.Helper()
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(10 * time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
					AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listener},
				}},
			}}}}},
		}}},
		TransportSocket: &corev3.TransportSocket{Name: "internal_upstream", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAnyT(tb, &internalv3.InternalUpstreamTransport{
			TransportSocket: &corev3.TransportSocket{Name: "raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAnyT(tb, &rawv3.RawBuffer{})}},
		})}},
	}
}

// terminateHCM is istiod's connect_terminate HCM (plaintext here): CONNECT allowed on
// HTTP/2, the CONNECT route terminating into cluster, set_filter_state saving the
// :authority as the original destination for the next internal listener.
func terminateHCM(tb testing.TB, cluster string) *listenerv3.Filter {
	tb.Helper()
	sfs := &httpsfsv3.Config{OnRequestHeaders: []*commonsfsv3.FilterStateValue{
		fsValue("envoy.filters.listener.original_dst.local_ip", "", "%REQ(:AUTHORITY)%", commonsfsv3.FilterStateValue_ONCE),
		fsValue("io.istio.connect_authority", "istio.hashable_string", "%REQ(:AUTHORITY)%", commonsfsv3.FilterStateValue_ONCE),
	}}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "connect_terminate",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "default",
			VirtualHosts: []*routev3.VirtualHost{{Name: "default", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
					UpgradeConfigs: []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "CONNECT",
						ConnectConfig: &routev3.RouteAction_UpgradeConfig_ConnectConfig{}}},
				}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "connect_authority", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(tb, sfs)}},
			{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(tb, &routercfg.Router{})}},
		},
		Http2ProtocolOptions: &corev3.Http2ProtocolOptions{AllowConnect: true},
		UpgradeConfigs:       []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}},
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(tb, hcm)}}
}

// connectStream opens an HTTP/2 (prior knowledge) CONNECT to authority through addr.
func connectStream(tb testing.TB, addr netip.AddrPort, authority string) (io.WriteCloser, *http.Response) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	cc, err := (&http2.Transport{AllowHTTP: true, DialTLSContext: func(context.Context, string, string, *tls.Config) (net.Conn, error) { return c, nil }}).NewClientConn(c) //nolint:staticcheck // one dialled connection
	if err != nil {
		tb.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodConnect, "http://"+authority, pr)
	req.Host = authority
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	resp, err := cc.RoundTrip(req.WithContext(ctx))
	if err != nil {
		tb.Fatal(err)
	}
	return pw, resp
}

// A CONNECT on an HCM with CONNECT enabled and allow_connect reaches the route's
// connect_matcher; connect_config terminates it: the proxy connects to the cluster (an
// internal listener), answers 200 and carries the stream's bytes. The :authority, saved
// by set_filter_state as the original destination shared once with the upstream, is
// where the internal listener's original_dst sends the connection, as in istiod's
// waypoint (connect_terminate -> main_internal).
func TestConnectTerminateToInternalListener(t *testing.T) {
	backend := lineEchoServer(t)
	srv := newUnstartedForApply(t)
	clusters := []*anypb.Any{mustAnyT(t, staticInternalCluster(t, "main_internal", "main_internal")), mustAnyT(t, origDstCluster("orig", ""))}
	if err := srv.Apply(xdsclient.ClusterType, "1", clusters); err != nil {
		t.Fatal(err)
	}
	// The internal listener re-shares the destination once more (istiod's direct-tcp
	// chain): a network set_filter_state reading the object it received.
	nsfs := &netsfsv3.Config{OnNewConnection: []*commonsfsv3.FilterStateValue{
		fsValue("envoy.filters.listener.original_dst.local_ip", "", "%FILTER_STATE(envoy.filters.listener.original_dst.local_ip:PLAIN)%", commonsfsv3.FilterStateValue_ONCE),
	}}
	terminate := &listenerv3.Listener{Name: "connect_terminate", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{terminateHCM(t, "main_internal")}}}}
	inner := &listenerv3.Listener{
		Name:              "main_internal",
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAnyT(t, &origdstv3.OriginalDst{})}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{
			{Name: "connect_authority", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(t, nsfs)}},
			tcpProxy(t, "inner", "orig"),
		}}},
	}
	if err := srv.Apply(xdsclient.ListenerType, "1", []*anypb.Any{mustAnyT(t, terminate), mustAnyT(t, inner)}); err != nil {
		t.Fatal(err)
	}
	addr, ok := srv.listeners.Addr("connect_terminate")
	if !ok {
		t.Fatal("connect_terminate not bound")
	}
	w, resp := connectStream(t, addr, backend.String())
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status %d, want 200", resp.StatusCode)
	}
	if _, err := io.WriteString(w, "through the waypoint\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "through the waypoint\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	_ = w.Close()
	eventually(t, "the CONNECT counted by the HCM and the internal listener", func() bool {
		_, body := adminGet(t, srv, "/stats?filter=^(http.connect_terminate.downstream_rq_total|listener.main_internal.downstream_cx_total)")
		return strings.Contains(body, "http.connect_terminate.downstream_rq_total: 1") && strings.Contains(body, "listener.main_internal.downstream_cx_total: 1")
	})
}

// A CONNECT to an authority nothing listens on is answered 503 (a connect failure of
// the terminated tunnel's upstream), and a plain request does not match the CONNECT
// route.
func TestConnectTerminateFailures(t *testing.T) {
	srv := newUnstartedForApply(t)
	clusters := []*anypb.Any{mustAnyT(t, staticInternalCluster(t, "main_internal", "nowhere"))}
	if err := srv.Apply(xdsclient.ClusterType, "1", clusters); err != nil {
		t.Fatal(err)
	}
	terminate := &listenerv3.Listener{Name: "connect_terminate", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{terminateHCM(t, "main_internal")}}}}
	if err := srv.Apply(xdsclient.ListenerType, "1", []*anypb.Any{mustAnyT(t, terminate)}); err != nil {
		t.Fatal(err)
	}
	addr, _ := srv.listeners.Addr("connect_terminate")
	_, resp := connectStream(t, addr, "10.96.0.1:80")
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("CONNECT to no listener: status %d, want 503", resp.StatusCode)
	}
	code, _, _ := get(t, http.DefaultClient, "http://"+addr.String()+"/", "")
	if code != http.StatusNotFound {
		t.Errorf("GET on the CONNECT-only route table: status %d, want 404", code)
	}
}
