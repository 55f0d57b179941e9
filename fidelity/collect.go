package fidelity

import (
	"context"
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// collectIstiod fetches everything istiod generates for pod p's sidecar, as a client that
// accepts everything would: LDS and CDS, then the RDS of every listener and the EDS of
// every EDS cluster. The diff compares meshlab's generator with this, independently of
// what the meshlab proxy accepted (a refused listener asks for no routes).
func collectIstiod(ctx context.Context, addr string, p *model.Pod) (map[string]map[string]proto.Message, error) {
	meta, err := structpb.NewStruct(nodeMetadata(p))
	if err != nil {
		return nil, fmt.Errorf("build node metadata: %w", err)
	}
	return collectIstiodNode(ctx, addr, &corev3.Node{Id: nodeID(p), Cluster: p.Workload + "." + p.Namespace, Metadata: meta})
}

// collectIstiodNode is collectIstiod for any node (a waypoint's).
func collectIstiodNode(ctx context.Context, addr string, node *corev3.Node) (map[string]map[string]proto.Message, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial istiod: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("open ADS stream to istiod: %w", err)
	}
	for _, typ := range []string{clusterType, listenerType} {
		if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typ}); err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", shortNames[typ], err)
		}
	}
	got := map[string]map[string]proto.Message{}
	want := map[string][]string{} // RDS and EDS names subscribed to
	for {
		if done(got, want) {
			return got, nil
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("receive from istiod (have %v): %w", typesGot(got), err)
		}
		typ := resp.GetTypeUrl()
		if got[typ] == nil || typ == listenerType || typ == clusterType {
			got[typ] = map[string]proto.Message{}
		}
		for _, a := range resp.GetResources() {
			m, err := a.UnmarshalNew()
			if err != nil {
				return nil, fmt.Errorf("decode %s from istiod: %w", shortNames[typ], err)
			}
			got[typ][messageName(m)] = m
		}
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: typ, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: want[typ]}
		if err := stream.Send(ack); err != nil {
			return nil, fmt.Errorf("ack %s: %w", shortNames[typ], err)
		}
		var sub string
		var names []string
		switch typ {
		case listenerType:
			sub, names = routeType, routeNames(got[typ])
		case clusterType:
			sub, names = endpointType, edsNames(got[typ])
		}
		if sub != "" && fmt.Sprint(names) != fmt.Sprint(want[sub]) {
			want[sub] = names
			if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: sub, ResourceNames: names}); err != nil {
				return nil, fmt.Errorf("subscribe %s: %w", shortNames[sub], err)
			}
		}
	}
}

// done reports whether LDS and CDS arrived and every subscribed RDS and EDS name did.
func done(got map[string]map[string]proto.Message, want map[string][]string) bool {
	if got[listenerType] == nil || got[clusterType] == nil {
		return false
	}
	for typ, names := range want {
		for _, n := range names {
			if got[typ][n] == nil {
				return false
			}
		}
	}
	return true
}

func typesGot(got map[string]map[string]proto.Message) []string {
	var out []string
	for t := range got {
		out = append(out, shortNames[t])
	}
	sort.Strings(out)
	return out
}

// routeNames returns the RDS names the listeners' HTTP connection managers subscribe to.
func routeNames(listeners map[string]proto.Message) []string {
	set := map[string]bool{}
	for _, m := range listeners {
		l := m.(*listenerv3.Listener)
		chains := append([]*listenerv3.FilterChain{l.GetDefaultFilterChain()}, l.GetFilterChains()...)
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().MessageIs(hcm) && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
					if n := hcm.GetRds().GetRouteConfigName(); n != "" {
						set[n] = true
					}
				}
			}
		}
	}
	return sortedKeys(set)
}

// edsNames returns the EDS service names of the EDS clusters.
func edsNames(clusters map[string]proto.Message) []string {
	set := map[string]bool{}
	for _, m := range clusters {
		c := m.(*clusterv3.Cluster)
		if c.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		n := c.GetEdsClusterConfig().GetServiceName()
		if n == "" {
			n = c.GetName()
		}
		set[n] = true
	}
	return sortedKeys(set)
}
