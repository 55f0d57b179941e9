package xds

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

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
	byHosts  map[string]*sharedOutbound // by namespace, of hosts only (GenerateHosts)
	hosts    map[string]bool            // the hosts of byHosts
	valid    map[types.Resource]bool    // the shared clusters, validated once
}

// isValid reports whether r is a shared resource validated already; nil sh: none.
func (sh *Shared) isValid(r types.Resource) bool {
	if sh == nil {
		return false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.valid[r]
}

// build fills e once with the outbound clusters of pod (of hosts, when not nil),
// validated, and records them valid.
func (sh *Shared) build(e *sharedOutbound, pod *model.Pod, hosts map[string]bool) {
	e.once.Do(func() {
		e.cs, e.err = outboundClusters(sh.m, pod, hosts)
		if e.err == nil {
			e.err = validateAll(e.cs)
		}
		if e.err != nil {
			return
		}
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.valid == nil {
			sh.valid = map[types.Resource]bool{}
		}
		for _, c := range e.cs {
			sh.valid[c] = true
		}
	})
}

type sharedOutbound struct {
	once sync.Once
	cs   []types.Resource
	err  error
}

// NewShared returns an empty Shared for m.
func NewShared(m *model.Model) *Shared {
	return &Shared{m: m}
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
	if w, ok := WaypointOf(m, pod); ok {
		return generateWaypointTypes(m, w, typs...) // a waypoint's own shapes (waypoint.go)
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
		out[resource.SecretType] = withOriginationSecrets(gatewaySecrets(m, pod), m, pod.Namespace) // transportsocket.go
	}
	for typ, rs := range out {
		if err := validateAllBut(rs, sh.isValid); err != nil {
			return nil, fmt.Errorf("generate xds for %s/%s: %s: %w", pod.Namespace, pod.Name, typ, err)
		}
		sort.SliceStable(rs, func(i, j int) bool { return cachev3.GetResourceName(rs[i]) < cachev3.GetResourceName(rs[j]) })
	}
	return out, nil
}

// Scope is what a change between two models can touch for the proxies of the newer one,
// as istiod scopes a push by its ConfigsUpdated and an endpoint change by an incremental
// EDS push. What it leaves out is reused from each proxy's last resources.
type Scope struct {
	// Types are generated again, whole, for every proxy.
	Types []resource.Type
	// Hosts are the hostnames whose outbound clusters and load assignments are generated
	// again for every proxy, the other hosts' kept (GenerateHosts), where ClusterType or
	// EndpointType is not in Types: the Services a change adds, removes or edits, those
	// selecting a pod that came, went or changed, and the hosts of changed
	// DestinationRules.
	Hosts map[string]bool
	// Pods are the node ids of proxies whose every type is generated again: a pod that
	// changed in place or that a changed Service selects (its inbound side), and on any
	// Service, pod or DestinationRule change the gateways and proxyless pods, whose generators read
	// services and endpoints in other ways.
	Pods map[string]bool
}

// ChangeScope returns the scope of the change from old to cur, by what each type's
// generation reads. Istio's networking objects: when only VirtualServices differ,
// routes, and listeners too when a VirtualService of either model has TCP or TLS routes
// (those are in listeners, and which VirtualService a host takes may change with any);
// DestinationRules: the clusters and load assignments (subsets) of the hosts a changed
// rule resolves to, and every proxy's secrets (a rule's credentialName brings the
// Secret's SDS resources). Pods (an endpoint
// change): the clusters and load assignments of the Services selecting a pod that came,
// went or changed (its labels pick subsets, its service account the clusters' SANs, its
// sidecar the endpoint's mTLS mark), and that pod whole. Services: their clusters and
// load assignments, every proxy's routes (a virtual host per service), listeners when
// the set of HTTP port numbers changes or a changed Service has a TCP port, and the pods
// they select whole. What it cannot scope that finely is every type: a change to
// anything else (mesh config, other Istio kinds, a field added to the model later), a
// Service change with a ServiceEntry on its host (or on "<name>.<ns>", which a
// DestinationRule may name either), a pod change with ServiceEntry endpoints naming
// pods. Values are compared with proto.Equal and
// field by field; what cannot be compared counts as changed. A nil model changes every
// type.
func ChangeScope(old, cur *model.Model) Scope {
	full := Scope{Types: slices.Clone(GeneratedTypes)}
	if old == nil || cur == nil {
		return full
	}
	rest := func(m *model.Model) model.Model {
		c := *m
		c.Istio.VirtualServices, c.Istio.DestinationRules = nil, nil
		c.Services, c.Pods = nil, nil
		return c
	}
	ro, rc := rest(old), rest(cur)
	if !equalValue(reflect.ValueOf(&ro).Elem(), reflect.ValueOf(&rc).Elem()) {
		return full
	}
	if sendsHBONE(old) != sendsHBONE(cur) {
		return full // every proxy gains or loses connect_originate (hbone_send.go)
	}
	var typs []resource.Type
	add := func(ts ...resource.Type) {
		for _, t := range ts {
			if !slices.Contains(typs, t) {
				typs = append(typs, t)
			}
		}
	}
	if !equalValue(reflect.ValueOf(old.Istio.VirtualServices), reflect.ValueOf(cur.Istio.VirtualServices)) {
		add(resource.RouteType)
		if hasNonHTTPRoutes(old) || hasNonHTTPRoutes(cur) {
			add(resource.ListenerType)
		}
	}
	sc := Scope{Hosts: map[string]bool{}, Pods: map[string]bool{}}
	// A DestinationRule shapes the clusters and load assignments (subsets) of the one host
	// it resolves to (destinationRuleFor matches hosts exactly), in either model; its
	// credentialName brings secrets, generated whole.
	drs := changedObjects(old.Istio.DestinationRules, cur.Istio.DestinationRules,
		func(d *model.IstioConfig[*networking.DestinationRule]) string { return d.Namespace + "/" + d.Name })
	for _, c := range drs {
		for _, d := range []*model.IstioConfig[*networking.DestinationRule]{c.old, c.cur} {
			if d != nil {
				sc.Hosts[resolveHost(old, d.Spec.GetHost(), d.Namespace)] = true
				sc.Hosts[resolveHost(cur, d.Spec.GetHost(), d.Namespace)] = true
			}
		}
		add(resource.SecretType)
	}
	svcs := changedObjects(old.Services, cur.Services, func(s *model.Service) string { return s.Namespace + "/" + s.Name })
	pods := changedObjects(old.Pods, cur.Pods, func(p *model.Pod) string { return p.Namespace + "/" + p.Name })
	if len(svcs) == 0 && len(pods) == 0 && len(drs) == 0 {
		return Scope{Types: typs}
	}
	if len(pods) > 0 && entriesNamePods(cur) {
		return full
	}
	if len(svcs) > 0 {
		var short []string
		for _, c := range svcs {
			for _, s := range []*model.Service{c.old, c.cur} {
				if s == nil {
					continue
				}
				sc.Hosts[s.Hostname()] = true
				short = append(short, s.Name+"."+s.Namespace, s.Name+"."+s.Namespace+".svc")
				for _, p := range s.Ports {
					if !p.Protocol.IsHTTP() {
						add(resource.ListenerType) // its own listener, on its VIP
					}
				}
			}
		}
		// A host a VirtualService or DestinationRule writes as "<name>.<ns>" resolves to
		// the Service when there is one (resolveHost), else stays as written: a change of
		// what a DestinationRule applies to that scoping misses only when a ServiceEntry
		// has that host. The rest (routes, TCP and TLS routes) is generated whole below.
		if entryOnHost(cur, sc.Hosts, short) {
			return full
		}
		add(resource.RouteType) // a virtual host per service of the port
		if hasNonHTTPRoutes(old) || hasNonHTTPRoutes(cur) || !slices.Equal(httpPorts(old), httpPorts(cur)) {
			add(resource.ListenerType)
		}
		for _, p := range cur.Pods {
			for _, c := range svcs {
				if p.Sidecar.Inject && ((c.old != nil && c.old.Namespace == p.Namespace && c.old.Selects(p.Labels)) ||
					(c.cur != nil && c.cur.Namespace == p.Namespace && c.cur.Selects(p.Labels))) {
					sc.Pods[p.NodeID()] = true // its inbound side
				}
			}
		}
	}
	for _, c := range pods {
		if c.old != nil {
			for _, s := range old.ServicesFor(c.old) {
				sc.Hosts[s.Hostname()] = true
			}
		}
		if c.cur != nil {
			for _, s := range cur.ServicesFor(c.cur) {
				sc.Hosts[s.Hostname()] = true
			}
			if c.cur.Sidecar.Inject {
				sc.Pods[c.cur.NodeID()] = true
			}
		}
	}
	for _, p := range cur.Pods { // their generators read services, endpoints and rules in other ways
		if p.Sidecar.Inject && (p.Router || p.Sidecar.GRPCAgent) {
			sc.Pods[p.NodeID()] = true
		}
	}
	sc.Types = typs
	return sc
}

// ChangedTypes returns the types whose resources may differ between old and cur for a
// pod of both models: ChangeScope's types, or every type when its scope also names
// hosts or pods (a Service or pod change).
func ChangedTypes(old, cur *model.Model) []resource.Type {
	sc := ChangeScope(old, cur)
	if len(sc.Hosts) > 0 || len(sc.Pods) > 0 {
		return slices.Clone(GeneratedTypes)
	}
	return sc.Types
}

// Full reports whether the scope generates every type of every proxy again.
func (s Scope) Full() bool { return len(s.Types) == len(GeneratedTypes) }

// changed is one object that a change added (old nil), removed (cur nil) or edited.
type changed[T any] struct{ old, cur T }

// changedObjects returns the objects of old and cur, matched by key, that differ.
func changedObjects[T any](old, cur []T, key func(T) string) []changed[T] {
	byKey := make(map[string]T, len(old))
	for _, o := range old {
		byKey[key(o)] = o
	}
	var zero T
	var out []changed[T]
	for _, c := range cur {
		k := key(c)
		o, ok := byKey[k]
		delete(byKey, k)
		if !ok {
			out = append(out, changed[T]{zero, c})
		} else if !equalValue(reflect.ValueOf(o), reflect.ValueOf(c)) {
			out = append(out, changed[T]{o, c})
		}
	}
	for _, o := range old {
		if _, gone := byKey[key(o)]; gone {
			out = append(out, changed[T]{o, zero})
		}
	}
	return out
}

// entriesNamePods reports whether a ServiceEntry of m has a STATIC endpoint that names a
// lab pod instead of an address (instances in serviceentry.go looks the pod up).
func entriesNamePods(m *model.Model) bool {
	for _, se := range m.Istio.ServiceEntries {
		if se.Spec.GetResolution() == networking.ServiceEntry_DNS {
			continue
		}
		for _, we := range se.Spec.GetEndpoints() {
			if _, err := netip.ParseAddr(we.GetAddress()); err != nil {
				return true
			}
		}
	}
	return false
}

// entryOnHost reports whether a ServiceEntry of m has one of hosts or short.
func entryOnHost(m *model.Model, hosts map[string]bool, short []string) bool {
	for _, se := range m.Istio.ServiceEntries {
		for _, h := range se.Spec.GetHosts() {
			h = strings.TrimSuffix(strings.ToLower(h), ".")
			if hosts[h] || slices.Contains(short, h) {
				return true
			}
		}
	}
	return false
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
// SameButPods reports whether old and cur differ at most in their pods: every other field
// equal (compared as ChangeScope compares). Then the WDS addresses that are not pods'
// (AddressBuilder.Rest), the authorizations, and the Workload of each pod the two share
// (the same *model.Pod, of the same health) are the same in both, as long as neither has
// waypoints (a waypoint's readiness is read outside the model).
func SameButPods(old, cur *model.Model) bool {
	if old == nil || cur == nil {
		return false
	}
	o, c := *old, *cur
	o.Pods, c.Pods = nil, nil
	return equalValue(reflect.ValueOf(&o).Elem(), reflect.ValueOf(&c).Elem())
}

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
// its fields, a key of those fields: from one model m, pods with equal keys get
// identical resources of the type, so a generator may build them once per key (istiod's
// XDS cache keys routes and endpoints by what they depend on the same way). A sidecar's
// routes read its namespace (the domains' short names) and its labels only through the
// sourceLabels matches of m's VirtualServices, so the key holds which of those match; a
// gateway's routes are its Gateways', chosen by all its labels. Endpoints read the pod's
// namespace (the DestinationRule it sees). ok is false for the types that depend on the
// whole pod (listeners and clusters carry its inbound side).
func SharedKey(m *model.Model, typ resource.Type, pod *model.Pod) (key string, ok bool) {
	if pod.Sidecar.GRPCAgent || pod.Waypoint {
		return "", false // a proxyless pod's or a waypoint's resources have other shapes (grpc.go, waypoint.go)
	}
	switch typ {
	case resource.RouteType:
		var b strings.Builder
		b.WriteString(pod.Namespace)
		if pod.Router {
			b.WriteString("\x00router") // a gateway's routes are its Gateways'
			for _, k := range slices.Sorted(maps.Keys(pod.Labels)) {
				b.WriteString("\x00" + k + "=" + pod.Labels[k])
			}
			return b.String(), true
		}
		b.WriteByte(0)
		for _, vs := range m.Istio.VirtualServices {
			for _, h := range vs.Spec.GetHttp() {
				for _, mt := range h.GetMatch() {
					if sel := mt.GetSourceLabels(); len(sel) > 0 {
						b.WriteByte('0' + byte(boolInt(labelsMatch(sel, pod.Labels))))
					}
				}
			}
		}
		return b.String(), true
	case resource.EndpointType:
		return pod.Namespace, true
	}
	return "", false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// clusters is clusters(m, pod) with the outbound clusters built once per namespace: the
// same loops, outbound then inbound then the fixed clusters. (TestScopedUpdate in
// controlplane/discovery checks it against Generate.)
func (sh *Shared) clusters(pod *model.Pod) ([]types.Resource, error) {
	e := sh.entry(&sh.outbound, pod.Namespace)
	sh.build(e, pod, nil)
	if e.err != nil {
		return nil, e.err
	}
	local, err := localClusters(sh.m, pod)
	if err != nil {
		return nil, err
	}
	return append(slices.Clip(e.cs), local...), nil
}

// entry returns the entry of ns in *by, creating both.
func (sh *Shared) entry(by *map[string]*sharedOutbound, ns string) *sharedOutbound {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if *by == nil {
		*by = map[string]*sharedOutbound{}
	}
	e, ok := (*by)[ns]
	if !ok {
		e = &sharedOutbound{}
		(*by)[ns] = e
	}
	return e
}

// outboundClusters returns pod's outbound clusters, of the hosts in hosts only when
// hosts is not nil, in the order clusters builds them.
func outboundClusters(m *model.Model, pod *model.Pod, hosts map[string]bool) ([]types.Resource, error) {
	var out []types.Resource
	for _, sp := range outboundPorts(m) {
		if hosts != nil && !hosts[sp.host] {
			continue
		}
		for _, oc := range outboundClustersOf(m, pod, sp) {
			c, err := outboundCluster(m, sp, oc)
			if err != nil {
				return nil, fmt.Errorf("build cluster %s: %w", oc.name, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// GenerateHosts returns the outbound clusters (typ ClusterType) or load assignments
// (EndpointType) that Generate makes for pod of the hosts in hosts, and nothing else,
// validated and sorted by name: with ResourceHost, what a generator needs to replace a
// Scope's Hosts in a pod's last resources of typ. With sh (nil: none) the clusters are
// built once per namespace; every call on one Shared must pass the same hosts.
func GenerateHosts(m *model.Model, pod *model.Pod, sh *Shared, typ resource.Type, hosts map[string]bool) ([]types.Resource, error) {
	if sh != nil && sh.m != m {
		return nil, errors.New("generate xds: Shared made for another model")
	}
	if m == nil || pod == nil {
		return nil, errors.New("generate xds: nil model or pod")
	}
	if pod.Sidecar.GRPCAgent {
		return nil, fmt.Errorf("generate xds for %s/%s: a proxyless pod's resources are generated whole", pod.Namespace, pod.Name)
	}
	var out []types.Resource
	var err error
	switch typ {
	case resource.ClusterType:
		if sh == nil {
			out, err = outboundClusters(m, pod, hosts)
			break
		}
		sh.mu.Lock()
		if sh.hosts == nil {
			sh.hosts = hosts
		}
		same := reflect.ValueOf(sh.hosts).UnsafePointer() == reflect.ValueOf(hosts).UnsafePointer()
		sh.mu.Unlock()
		if !same {
			return nil, errors.New("generate xds: Shared used with other hosts")
		}
		e := sh.entry(&sh.byHosts, pod.Namespace)
		sh.build(e, pod, hosts)
		out, err = slices.Clip(e.cs), e.err
	case resource.EndpointType:
		out = hostEndpoints(m, pod, hosts)
	default:
		return nil, fmt.Errorf("generate xds for %s/%s: type %s is not generated by host", pod.Namespace, pod.Name, typ)
	}
	if err == nil {
		err = validateAllBut(out, sh.isValid)
	}
	if err != nil {
		return nil, fmt.Errorf("generate xds for %s/%s: %s: %w", pod.Namespace, pod.Name, typ, err)
	}
	out = slices.Clone(out)
	sort.SliceStable(out, func(i, j int) bool { return cachev3.GetResourceName(out[i]) < cachev3.GetResourceName(out[j]) })
	return out, nil
}

// ResourceHost returns the host of an outbound cluster or load assignment named
// "outbound|<port>|<subset>|<host>", or "" for any other name.
func ResourceHost(name string) string {
	rest, ok := strings.CutPrefix(name, "outbound|")
	if !ok {
		return ""
	}
	for range 2 { // past the port and the subset, without allocating
		i := strings.IndexByte(rest, '|')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	return rest
}
