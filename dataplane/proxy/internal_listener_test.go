package proxy

import (
	"bufio"
	"net"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	internalv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	rawv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// lineEchoServer accepts on 127.0.0.1 and echoes each line back.
func lineEchoServer(tb testing.TB) netip.AddrPort {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// internalEndpointCluster is a STATIC cluster with one envoy_internal_address endpoint
// of listener, whose metadata names dst as the original destination, behind an
// internal_upstream transport socket passing that metadata through (istiod's
// inbound-vip cluster shape).
func internalEndpointCluster(t *testing.T, name, listener string, dst netip.AddrPort) *clusterv3.Cluster {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{"local": dst.String()})
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(10 * time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
						AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listener},
						EndpointId:           dst.String(),
					}},
				}}},
				Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.filters.listener.original_dst": md}},
			}},
		}}},
		TransportSocket: &corev3.TransportSocket{
			Name: "internal_upstream",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAnyT(t, &internalv3.InternalUpstreamTransport{
				PassthroughMetadata: []*internalv3.InternalUpstreamTransport_MetadataValueSource{{
					Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Host_{Host: &metadatav3.MetadataKind_Host{}}},
					Name: "envoy.filters.listener.original_dst",
				}},
				TransportSocket: &corev3.TransportSocket{Name: "raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAnyT(t, &rawv3.RawBuffer{})}},
			})},
		},
	}
}

// A connection to an envoy_internal_address endpoint reaches the internal listener of
// that name inside the proxy; its original_dst listener filter takes the destination
// from the metadata the internal_upstream transport socket passed through, and the
// listener's tcp_proxy to an ORIGINAL_DST cluster connects there.
func TestInternalListenerWithPassthroughMetadata(t *testing.T) {
	backend := lineEchoServer(t)
	srv := newUnstartedForApply(t)
	clusters := []*anypb.Any{
		mustAnyT(t, internalEndpointCluster(t, "to_inner", "inner", backend)),
		mustAnyT(t, origDstCluster("orig", "")),
	}
	if err := srv.Apply(xdsclient.ClusterType, "1", clusters); err != nil {
		t.Fatal(err)
	}
	outer := &listenerv3.Listener{
		Name: "outer", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcpProxy(t, "outer", "to_inner")}}},
	}
	inner := &listenerv3.Listener{
		Name:              "inner",
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAnyT(t, &origdstv3.OriginalDst{})}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcpProxy(t, "inner", "orig")}}},
	}
	if err := srv.Apply(xdsclient.ListenerType, "1", []*anypb.Any{mustAnyT(t, outer), mustAnyT(t, inner)}); err != nil {
		t.Fatal(err)
	}
	addr, ok := srv.listeners.Addr("outer")
	if !ok {
		t.Fatal("outer not bound")
	}
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("through the internal listener\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "through the internal listener\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	// The internal listener counts its connection under its name.
	eventually(t, "listener.inner.downstream_cx_total", func() bool {
		_, body := adminGet(t, srv, "/stats?filter=^listener.inner.downstream_cx_total")
		return body == "listener.inner.downstream_cx_total: 1\n"
	})
}

// An internal address naming no internal listener is a connect failure.
func TestInternalAddressWithoutListenerFails(t *testing.T) {
	srv := newUnstartedForApply(t)
	if err := srv.Apply(xdsclient.ClusterType, "1", []*anypb.Any{mustAnyT(t, internalEndpointCluster(t, "to_nowhere", "nowhere", netip.MustParseAddrPort("127.0.0.1:9")))}); err != nil {
		t.Fatal(err)
	}
	outer := &listenerv3.Listener{
		Name: "outer", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcpProxy(t, "outer", "to_nowhere")}}},
	}
	if err := srv.Apply(xdsclient.ListenerType, "1", []*anypb.Any{mustAnyT(t, outer)}); err != nil {
		t.Fatal(err)
	}
	addr, _ := srv.listeners.Addr("outer")
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes through a cluster whose internal listener does not exist", n)
	}
	eventually(t, "cluster.to_nowhere.upstream_cx_connect_fail", func() bool {
		_, body := adminGet(t, srv, "/stats?filter=^cluster.to_nowhere.upstream_cx_connect_fail")
		return body == "cluster.to_nowhere.upstream_cx_connect_fail: 1\n"
	})
}
