package xds

import (
	"net/netip"
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// waypointScenario is an ambient namespace `shop` whose services use the waypoint
// `waypoint` of their namespace (an HTTP and a TCP service), a namespace `other` whose
// service uses it across namespaces (the waypoint allows attachment from all), and a
// namespace `optout` that opts out.
const waypointScenario = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: shop}
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - {name: mesh, port: 15008, protocol: HBONE, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}
---
apiVersion: v1
kind: Namespace
metadata:
  name: other
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: shop}
---
apiVersion: v1
kind: Namespace
metadata:
  name: optout
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: none}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-v1, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web, version: v1}}
  template:
    metadata: {labels: {app: web, version: v1}}
    spec: {containers: [{name: web, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: db, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: meshlab/demoapp, ports: [{containerPort: 5432}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: other}
spec:
  selector: {app: api}
  ports: [{name: http, port: 8000}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: other}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: meshlab/demoapp, ports: [{containerPort: 8000}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: legacy, namespace: optout}
spec:
  selector: {app: legacy}
  ports: [{name: http, port: 80}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: legacy, namespace: optout}
spec:
  selector: {matchLabels: {app: legacy}}
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: legacy, image: meshlab/demoapp, ports: [{containerPort: 80}]}]}
`

func waypointModel(t *testing.T) *model.Model {
	t.Helper()
	return buildWaypointModel(t, "waypoint.yaml", []byte(waypointScenario))
}

// buildWaypointModel builds the model of scenario data (named name) in the lab's CIDRs,
// its ambient pods redirected to ztunnel as the lab's node agent marks them (what makes
// a waypoint reach them over HBONE).
func buildWaypointModel(t *testing.T, name string, data []byte) *model.Model {
	t.Helper()
	sc, err := config.Load(name, data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(config.BuildOptions{
		PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[model.AnnotationAmbientRedirection] = model.AmbientRedirectionEnabled
		}
	}
	return m
}

// shopWaypoint is the waypoint of m's waypoint pod, as discovery generates it.
func shopWaypoint(t *testing.T, m *model.Model) WaypointSpec {
	t.Helper()
	for _, p := range m.Pods {
		if w, ok := WaypointOf(m, p); ok {
			if w.Name != "waypoint" || w.Namespace != "shop" || w.For != model.WaypointForService || !w.IP.IsValid() || !w.VIP.IsValid() {
				t.Fatalf("WaypointOf(%s) = %+v", p.Name, w)
			}
			return w
		}
	}
	t.Fatal("no waypoint pod in the model")
	return WaypointSpec{}
}

func TestWaypointServices(t *testing.T) {
	t.Parallel()
	m := waypointModel(t)
	wp := shopWaypoint(t, m)
	var got []string
	for _, s := range WaypointServices(m, wp) {
		got = append(got, s.Hostname())
	}
	want := []string{"api.other.svc.cluster.local", "db.shop.svc.cluster.local", "web.shop.svc.cluster.local"}
	if !slices.Equal(got, want) {
		t.Errorf("WaypointServices = %v, want %v", got, want)
	}
	other := wp
	other.Namespace = "other"
	if s := WaypointServices(m, other); len(s) != 0 {
		t.Errorf("waypoint other/waypoint serves %v; other's namespace names shop's", s)
	}
}

func TestGenerateWaypoint(t *testing.T) {
	t.Parallel()
	m := waypointModel(t)
	res, err := GenerateWaypoint(m, shopWaypoint(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res[resource.RouteType]); n != 0 {
		t.Errorf("%d route configurations: a waypoint's routes are inline", n)
	}
	for typ, rs := range res {
		for _, r := range rs {
			validateDeep(t, typ+"/"+cachev3.GetResourceName(r), r)
		}
	}
	var names []string
	var main *listener.Listener
	for _, r := range res[resource.ListenerType] {
		l := r.(*listener.Listener)
		names = append(names, l.GetName())
		if l.GetName() == MainInternalListener {
			main = l
		}
	}
	wantListeners := []string{ConnectTerminateListener, MainInternalListener, ConnectOriginateListener, InnerConnectOriginate, OuterConnectOriginate}
	if !slices.Equal(names, wantListeners) {
		t.Fatalf("listeners %v, want %v", names, wantListeners)
	}
	var chains []string
	for _, fc := range main.GetFilterChains() {
		chains = append(chains, fc.GetName())
	}
	wantChains := []string{
		"inbound-vip|8000|http|api.other.svc.cluster.local",
		"inbound-vip|5432|tcp|db.shop.svc.cluster.local",
		"inbound-vip|80|http|web.shop.svc.cluster.local",
		"direct-tcp", "direct-http",
	}
	if !slices.Equal(chains, wantChains) {
		t.Errorf("main_internal chains %v, want %v", chains, wantChains)
	}
	if main.GetInternalListener() == nil || main.GetFilterChainMatcher() == nil {
		t.Error("main_internal is not an internal listener with a filter-chain matcher")
	}
	for _, r := range res[resource.ClusterType] {
		c := r.(*cluster.Cluster)
		if c.GetName() == ConnectOriginateListener && c.GetOriginalDstLbConfig().GetUpstreamPortOverride().GetValue() != HBONEPort {
			t.Errorf("connect_originate does not dial port %d: %v", HBONEPort, c.GetOriginalDstLbConfig())
		}
	}
	for _, r := range res[resource.EndpointType] {
		la := r.(*endpoint.ClusterLoadAssignment)
		if la.GetClusterName() != "inbound-vip|80|http|web.shop.svc.cluster.local" {
			continue
		}
		eps := la.GetEndpoints()[0].GetLbEndpoints()
		if len(eps) != 2 {
			t.Fatalf("web has %d endpoints, want its 2 pods", len(eps))
		}
		addr := eps[0].GetEndpoint().GetAddress().GetEnvoyInternalAddress()
		local := eps[0].GetMetadata().GetFilterMetadata()[originalDstMetadata].GetFields()["local"].GetStringValue()
		if addr.GetServerListenerName() != ConnectOriginateListener || addr.GetEndpointId() != local || netip.MustParseAddrPort(local).Port() != 8080 {
			t.Errorf("web's endpoint is %v with original destination %q, want connect_originate carrying the pod's address:8080", addr, local)
		}
	}
	testutil.Golden(t, "waypoint-shop", dumpJSON(t, res))
}

// TestGenerateDispatchesWaypoint: discovery's path (Generate, GenerateShared) gives a
// waypoint's pod the waypoint's resources, never a sidecar's or a gateway's.
func TestGenerateDispatchesWaypoint(t *testing.T) {
	t.Parallel()
	m := waypointModel(t)
	var pod *model.Pod
	for _, p := range m.Pods {
		if p.Waypoint {
			pod = p
		}
	}
	if pod == nil {
		t.Fatal("no waypoint pod")
	}
	want, err := GenerateWaypoint(m, shopWaypoint(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for name, gen := range map[string]func() (map[resource.Type][]types.Resource, error){
		"Generate": func() (map[resource.Type][]types.Resource, error) { return Generate(m, pod) },
		"GenerateShared": func() (map[resource.Type][]types.Resource, error) {
			return GenerateShared(m, pod, NewShared(m), GeneratedTypes...)
		},
	} {
		got, err := gen()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, typ := range GeneratedTypes {
			if g, w := resourceNames(got[typ]), resourceNames(want[typ]); !slices.Equal(g, sortedCopy(w)) {
				t.Errorf("%s %s = %v, want %v", name, typ, g, w)
			}
		}
	}
	if _, ok := SharedKey(m, resource.EndpointType, pod); ok {
		t.Error("a waypoint's endpoints are shared with sidecars by SharedKey")
	}
}

func resourceNames(rs []types.Resource) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, cachev3.GetResourceName(r))
	}
	return out
}

func sortedCopy(l []string) []string { return slices.Sorted(slices.Values(l)) }
