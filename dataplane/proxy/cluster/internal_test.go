package cluster

import (
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// istiod's connect_originate: ORIGINAL_DST with upstream_port_override 15008 and
// metadata_key envoy.filters.listener.original_dst/waypoint. The host is the metadata's
// address when the downstream has it, else the original destination, on port 15008.
func TestOriginalDstLbConfig(t *testing.T) {
	cfg, err := Compile(&clusterv3.Cluster{
		Name: "connect_originate", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy: clusterv3.Cluster_CLUSTER_PROVIDED, ConnectTimeout: durationpb.New(time.Second),
		LbConfig: &clusterv3.Cluster_OriginalDstLbConfig_{OriginalDstLbConfig: &clusterv3.Cluster_OriginalDstLbConfig{
			UpstreamPortOverride: wrapperspb.UInt32(15008),
			MetadataKey: &metadatav3.MetadataKey{Key: "envoy.filters.listener.original_dst",
				Path: []*metadatav3.MetadataKey_PathSegment{{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: "waypoint"}}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(stats.NewStore())
	t.Cleanup(m.Close)
	m.ApplyCDS([]*Config{cfg})
	c, _ := m.Get("connect_originate")
	dst := netip.MustParseAddrPort("10.244.0.6:9080")
	if h, err := c.PickFor(dst, nil); err != nil || h.Addr != netip.MustParseAddrPort("10.244.0.6:15008") {
		t.Errorf("without metadata: %v, %v; want 10.244.0.6:15008", h, err)
	}
	md, _ := structpb.NewStruct(map[string]any{"local": "10.244.0.6:9080", "waypoint": "10.244.0.9:15008"})
	if h, err := c.PickFor(dst, map[string]*structpb.Struct{"envoy.filters.listener.original_dst": md}); err != nil || h.Addr != netip.MustParseAddrPort("10.244.0.9:15008") {
		t.Errorf("with metadata: %v, %v; want 10.244.0.9:15008", h, err)
	}
	if _, err := c.PickFor(netip.AddrPort{}, nil); err == nil {
		t.Error("no destination and no metadata picked a host")
	}
	// Only ORIGINAL_DST clusters may have it.
	_, err = Compile(&clusterv3.Cluster{
		Name: "s", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}, ConnectTimeout: durationpb.New(time.Second),
		LbConfig: &clusterv3.Cluster_OriginalDstLbConfig_{OriginalDstLbConfig: &clusterv3.Cluster_OriginalDstLbConfig{}},
	})
	if err == nil {
		t.Error("a STATIC cluster with original_dst_lb_config compiled")
	}
}

func TestInternalURLHostRoundTrip(t *testing.T) {
	for _, a := range []internalconn.Addr{{Listener: "connect_originate", EndpointID: "10.244.0.6:9080"}, {Listener: "main_internal"}} {
		got, ok := parseInternalURLHost(internalURLHost(a))
		if !ok || got != a {
			t.Errorf("%v -> %q -> %v, %v", a, internalURLHost(a), got, ok)
		}
	}
	if _, ok := parseInternalURLHost("10.0.0.1:80"); ok {
		t.Error("a socket address parsed as internal")
	}
}
