package xds

import (
	"errors"
	"fmt"
	"sort"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Generate returns every resource of pod's sidecar proxy, keyed by go-control-plane
// resource type URL (resource.ListenerType, ClusterType, RouteType, EndpointType), each
// slice sorted by resource name. The pod is passed directly (there is no separate Proxy
// type): its namespace decides the short names in route domains, and the services
// selecting it decide its inbound chains and clusters. Every resource, and every
// typed_config inside it, has passed ValidateAll. Generate does not modify m or pod and
// may be called concurrently.
func Generate(m *model.Model, pod *model.Pod) (map[resource.Type][]types.Resource, error) {
	if m == nil {
		return nil, errors.New("generate xds: nil model")
	}
	if pod == nil {
		return nil, errors.New("generate xds: nil pod")
	}
	if pod.Sidecar.GRPCAgent {
		return generateGRPC(m, pod, GeneratedTypes...) // proxyless gRPC (grpc.go)
	}
	if w, ok := WaypointOf(m, pod); ok {
		return generateWaypointTypes(m, w, GeneratedTypes...) // a waypoint's own shapes (waypoint.go)
	}
	fail := func(err error) error { return fmt.Errorf("generate xds for %s/%s: %w", pod.Namespace, pod.Name, err) }
	rs, err := routes(m, pod)
	if err != nil {
		return nil, fail(err)
	}
	ls, err := listeners(m, pod)
	if err != nil {
		return nil, fail(err)
	}
	cs, err := clusters(m, pod)
	if err != nil {
		return nil, fail(err)
	}
	out := map[resource.Type][]types.Resource{
		resource.ListenerType: ls,
		resource.ClusterType:  cs,
		resource.RouteType:    rs,
		resource.EndpointType: endpoints(m, pod),
		resource.SecretType:   withOriginationSecrets(gatewaySecrets(m, pod), m, pod.Namespace), // transportsocket.go
	}
	for typ, rs := range out {
		if err := validateAll(rs); err != nil {
			return nil, fmt.Errorf("generate xds for %s/%s: %s: %w", pod.Namespace, pod.Name, typ, err)
		}
		sort.SliceStable(rs, func(i, j int) bool { return cachev3.GetResourceName(rs[i]) < cachev3.GetResourceName(rs[j]) })
	}
	return out, nil
}

// validateAll checks each resource against the constraints of Envoy's API and rejects
// duplicate names, which a model with clashing services could produce.
func validateAll(rs []types.Resource) error { return validateAllBut(rs, nil) }

// validateAllBut is validateAll without validating the resources valid reports valid
// already (nil: none), names still checked.
func validateAllBut(rs []types.Resource, valid func(types.Resource) bool) error {
	seen := make(map[string]bool, len(rs))
	for _, r := range rs {
		name := cachev3.GetResourceName(r)
		if seen[name] {
			return fmt.Errorf("duplicate resource %q", name)
		}
		seen[name] = true
		if valid != nil && valid(r) {
			continue
		}
		if v, ok := r.(validator); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("validate %q: %w", name, err)
			}
		}
	}
	return nil
}
