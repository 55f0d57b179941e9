package fidelity

import (
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// meshlabResources returns what meshlab's generator sends pod p, by type URL and name.
func meshlabResources(m *model.Model, p *model.Pod) (map[string]map[string]proto.Message, error) {
	gen, err := xds.Generate(m, p)
	if err != nil {
		return nil, fmt.Errorf("generate meshlab resources for %s/%s: %w", p.Namespace, p.Name, err)
	}
	return byTypeURL(gen), nil
}

// byTypeURL indexes a generator's resources by type URL and name.
func byTypeURL(gen map[resource.Type][]types.Resource) map[string]map[string]proto.Message {
	out := map[string]map[string]proto.Message{}
	for typ, url := range map[string]string{resource.ListenerType: listenerType, resource.ClusterType: clusterType, resource.RouteType: routeType, resource.EndpointType: endpointType} {
		out[url] = map[string]proto.Message{}
		for _, r := range gen[typ] {
			out[url][messageName(r)] = r
		}
	}
	return out
}
