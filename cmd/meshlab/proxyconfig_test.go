package main

import (
	"bytes"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func mustAnyPB(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testConfigDump(t *testing.T) *adminv3.ConfigDump {
	t.Helper()
	clusters := &adminv3.ClustersConfigDump{DynamicActiveClusters: []*adminv3.ClustersConfigDump_DynamicCluster{
		{Cluster: mustAnyPB(t, &clusterv3.Cluster{Name: "outbound|9080|v2|reviews.default.svc.cluster.local", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}})},
		{Cluster: mustAnyPB(t, &clusterv3.Cluster{Name: "PassthroughCluster", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}})},
	}}
	listeners := &adminv3.ListenersConfigDump{DynamicListeners: []*adminv3.ListenersConfigDump_DynamicListener{{
		Name: "0.0.0.0_9080",
		ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{Listener: mustAnyPB(t, &listenerv3.Listener{
			Name:       "0.0.0.0_9080",
			Address:    &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 9080}}}},
			BindToPort: wrapperspb.Bool(false),
		})},
	}}}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{mustAnyPB(t, clusters), mustAnyPB(t, listeners)}}
}

func TestProxyConfigTables(t *testing.T) {
	dump := testConfigDump(t)
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"clusters", []string{"SERVICE FQDN", "reviews.default.svc.cluster.local  9080  v2      outbound   EDS", "PassthroughCluster"}},
		{"listeners", []string{"0.0.0.0_9080  0.0.0.0  9080  false"}},
	} {
		var out bytes.Buffer
		if err := printProxyConfig(&out, dump, tc.typ, "short"); err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s table lacks %q:\n%s", tc.typ, w, out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := printProxyConfig(&out, dump, "clusters", "yaml"); err != nil || !strings.Contains(out.String(), "name: outbound|9080|v2|reviews.default.svc.cluster.local") {
		t.Errorf("yaml output (%v):\n%s", err, out.String())
	}
	if err := printProxyConfig(&out, dump, "routes", "short"); err == nil {
		t.Error("a missing section printed without an error")
	}
}
