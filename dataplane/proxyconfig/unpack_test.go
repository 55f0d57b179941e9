package proxyconfig

import (
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// unpackEach keeps the order of the items, skips those without a resource, and names
// what it could not decode.
func TestUnpackEach(t *testing.T) {
	t.Parallel()
	good := func(name string) *adminv3.ClustersConfigDump_StaticCluster {
		a, err := anypb.New(&clusterv3.Cluster{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return &adminv3.ClustersConfigDump_StaticCluster{Cluster: a}
	}
	get := (*adminv3.ClustersConfigDump_StaticCluster).GetCluster
	got, err := unpackEach([]*clusterv3.Cluster{{Name: "first"}}, []*adminv3.ClustersConfigDump_StaticCluster{good("a"), {}, good("b")}, get, "static cluster")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.GetName())
	}
	if strings.Join(names, ",") != "first,a,b" {
		t.Errorf("names = %q, want first,a,b", names)
	}
	bad := &adminv3.ClustersConfigDump_StaticCluster{Cluster: &anypb.Any{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Value: []byte{0xff}}}
	_, err = unpackEach([]*clusterv3.Cluster(nil), []*adminv3.ClustersConfigDump_StaticCluster{good("a"), bad}, get, "static cluster")
	if err == nil || !strings.HasPrefix(err.Error(), "decode static cluster type.googleapis.com/envoy.config.cluster.v3.Cluster: ") {
		t.Errorf("err = %v, want one naming the static cluster's type", err)
	}
}
