package xds

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
)

// GeneratedTypes are the resource types Generate returns, in the order they are built.
var GeneratedTypes = []resource.Type{resource.RouteType, resource.ListenerType, resource.ClusterType, resource.EndpointType, resource.SecretType}

// GenerateTypes is Generate restricted to typs: for each type asked it returns exactly
// what Generate returns for it (validated and sorted by name), without building the
// others, for the discovery server's scoped pushes (a VirtualService change rebuilds
// routes and listeners, not clusters). Listeners name the routes, so asking for
// listeners builds routes too; only the types asked are returned.
func GenerateTypes(m *model.Model, pod *model.Pod, typs ...resource.Type) (map[resource.Type][]types.Resource, error) {
	return GenerateShared(m, pod, nil, typs...)
}

// Shared holds what GenerateShared builds once for many pods of one model: the outbound
// clusters, which depend on the pod only through its namespace (the DestinationRule it
// sees), where the inbound ones are the pod's own. Create one per model with NewShared;
// it is safe for concurrent use.
type Shared struct {
	m        *model.Model
	mu       sync.Mutex
	outbound map[string]*sharedOutbound // by namespace
}

type sharedOutbound struct {
	once sync.Once
	cs   []types.Resource
	err  error
}

// NewShared returns an empty Shared for m.
func NewShared(m *model.Model) *Shared {
	return &Shared{m: m, outbound: map[string]*sharedOutbound{}}
}

// GenerateShared is GenerateTypes taking the parts pods share from sh (nil: none),
// built by the first pod that needs them; sh must have been made for m. The resources
// shared are the same objects for every pod: callers must not modify them.
func GenerateShared(m *model.Model, pod *model.Pod, sh *Shared, typs ...resource.Type) (map[resource.Type][]types.Resource, error) {
	if sh != nil && sh.m != m {
		return nil, errors.New("generate xds: Shared made for another model")
	}
	if m == nil {
		return nil, errors.New("generate xds: nil model")
	}
	if pod == nil {
		return nil, errors.New("generate xds: nil pod")
	}
	for _, t := range typs {
		if !slices.Contains(GeneratedTypes, t) {
			return nil, fmt.Errorf("generate xds for %s/%s: type %s is not generated", pod.Namespace, pod.Name, t)
		}
	}
	if pod.Sidecar.GRPCAgent {
		return generateGRPC(m, pod, typs...) // proxyless gRPC: istiod's gRPC generator (grpc.go)
	}
	want := func(t resource.Type) bool { return slices.Contains(typs, t) }
	fail := func(err error) error { return fmt.Errorf("generate xds for %s/%s: %w", pod.Namespace, pod.Name, err) }
	out := map[resource.Type][]types.Resource{}
	if want(resource.RouteType) || want(resource.ListenerType) {
		rs, err := routes(m, pod)
		if err != nil {
			return nil, fail(err)
		}
		if want(resource.RouteType) {
			out[resource.RouteType] = rs
		}
		if want(resource.ListenerType) {
			ls, err := listeners(m, pod)
			if err != nil {
				return nil, fail(err)
			}
			out[resource.ListenerType] = ls
		}
	}
	if want(resource.ClusterType) {
		var cs []types.Resource
		var err error
		if sh != nil {
			cs, err = sh.clusters(pod)
		} else {
			cs, err = clusters(m, pod)
		}
		if err != nil {
			return nil, fail(err)
		}
		out[resource.ClusterType] = cs
	}
	if want(resource.EndpointType) {
		out[resource.EndpointType] = endpoints(m, pod)
	}
	if want(resource.SecretType) {
		// credentials of a gateway's TLS servers and of the pod's TLS origination
		out[resource.SecretType] = withOriginationSecrets(gatewaySecrets(m, pod), m, pod) // transportsocket.go
	}
	for typ, rs := range out {
		if err := validateAll(rs); err != nil {
			return nil, fmt.Errorf("generate xds for %s/%s: %s: %w", pod.Namespace, pod.Name, typ, err)
		}
		sort.SliceStable(rs, func(i, j int) bool { return cachev3.GetResourceName(rs[i]) < cachev3.GetResourceName(rs[j]) })
	}
	return out, nil
}

// ChangedTypes returns the types whose resources may differ between old and cur for a
// pod of both models, by what each type's generation reads (istiod's ConfigsUpdated
// scoping): when only VirtualServices differ, routes, and listeners too when a
// VirtualService of either model has TCP or TLS routes (those are in listeners, and
// which VirtualService a host takes may change with any); when only DestinationRules differ, clusters,
// endpoints (subsets) and secrets (credentialName); when both, those five; anything else (services, pods, mesh
// config, other Istio kinds, a field added to the model later) every type. Specs are
// compared with proto.Equal, the rest field by field; what cannot be compared counts as
// changed. A nil model changes every type.
func ChangedTypes(old, cur *model.Model) []resource.Type {
	if old == nil || cur == nil {
		return slices.Clone(GeneratedTypes)
	}
	rest := func(m *model.Model) model.Model {
		c := *m
		c.Istio.VirtualServices, c.Istio.DestinationRules = nil, nil
		return c
	}
	ro, rc := rest(old), rest(cur)
	if !equalValue(reflect.ValueOf(&ro).Elem(), reflect.ValueOf(&rc).Elem()) {
		return slices.Clone(GeneratedTypes)
	}
	var out []resource.Type
	if !equalValue(reflect.ValueOf(old.Istio.VirtualServices), reflect.ValueOf(cur.Istio.VirtualServices)) {
		out = append(out, resource.RouteType)
		if hasNonHTTPRoutes(old) || hasNonHTTPRoutes(cur) {
			out = append(out, resource.ListenerType)
		}
	}
	if !equalValue(reflect.ValueOf(old.Istio.DestinationRules), reflect.ValueOf(cur.Istio.DestinationRules)) {
		// Secrets too: a rule's credentialName brings the Secret's SDS resources.
		out = append(out, resource.ClusterType, resource.EndpointType, resource.SecretType)
	}
	return out
}

// hasNonHTTPRoutes reports whether a VirtualService of m has TCP or TLS routes.
func hasNonHTTPRoutes(m *model.Model) bool {
	for _, vs := range m.Istio.VirtualServices {
		if len(vs.Spec.GetTcp()) > 0 || len(vs.Spec.GetTls()) > 0 {
			return true
		}
	}
	return false
}

var protoMessage = reflect.TypeFor[proto.Message]()

// equalValue reports whether a and b hold equal values: proto messages by proto.Equal,
// other values field by field, element by element. Functions and channels are equal
// only when both are nil; a nil and an empty slice or map differ.
func equalValue(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	if a.Kind() == reflect.Pointer && a.Type().Implements(protoMessage) && a.CanInterface() && b.CanInterface() {
		return proto.Equal(a.Interface().(proto.Message), b.Interface().(proto.Message))
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Pointer && a.Pointer() == b.Pointer() {
			return true
		}
		return equalValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !equalValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !equalValue(it.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return a.IsNil() && b.IsNil()
	default:
		return a.Equal(b)
	}
}

// SharedKey returns, for a type whose resources depend on the pod only through some of
// its fields, a key of those fields: from one model, pods with equal keys get identical
// resources of the type, so a generator may build them once per key (istiod's XDS
// cache keys routes and endpoints by what they depend on the same way). Routes read
// the pod's namespace (the domains' short names) and labels (sourceLabels matches);
// endpoints its namespace (the DestinationRule it sees). ok is false for the types
// that depend on the whole pod (listeners and clusters carry its inbound side).
func SharedKey(typ resource.Type, pod *model.Pod) (key string, ok bool) {
	if pod.Sidecar.GRPCAgent {
		return "", false // a proxyless pod's resources have other shapes (grpc.go)
	}
	switch typ {
	case resource.RouteType:
		var b strings.Builder
		b.WriteString(pod.Namespace)
		if pod.Router {
			b.WriteString("\x00router") // a gateway's routes are its Gateways'
		}
		for _, k := range slices.Sorted(maps.Keys(pod.Labels)) {
			b.WriteString("\x00" + k + "=" + pod.Labels[k])
		}
		return b.String(), true
	case resource.EndpointType:
		return pod.Namespace, true
	}
	return "", false
}

// clusters is clusters(m, pod) with the outbound clusters built once per namespace: the
// same loops, outbound then inbound then the fixed clusters. (TestScopedUpdate in
// controlplane/discovery checks it against Generate.)
func (sh *Shared) clusters(pod *model.Pod) ([]types.Resource, error) {
	m := sh.m
	sh.mu.Lock()
	e, ok := sh.outbound[pod.Namespace]
	if !ok {
		e = &sharedOutbound{}
		sh.outbound[pod.Namespace] = e
	}
	sh.mu.Unlock()
	e.once.Do(func() {
		for _, sp := range outboundPorts(m) {
			for _, oc := range outboundClustersOf(m, pod, sp) {
				c, err := outboundCluster(m, sp, oc)
				if err != nil {
					e.err = fmt.Errorf("build cluster %s: %w", oc.name, err)
					return
				}
				e.cs = append(e.cs, c)
			}
		}
	})
	if e.err != nil {
		return nil, e.err
	}
	local, err := localClusters(m, pod)
	if err != nil {
		return nil, err
	}
	return append(slices.Clip(e.cs), local...), nil
}
