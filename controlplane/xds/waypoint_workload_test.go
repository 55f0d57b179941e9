package xds

import (
	"slices"
	"strings"
	"testing"

	xdsmatcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	netinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// workloadWaypointScenario is istioctl's `waypoint apply --for workload --name
// reviews-v2-pod-waypoint` in an ambient namespace whose reviews-v2 pods name it
// (istio.io/use-waypoint on the pod), and a namespace waypoint for all traffic in
// namespace all that its pods and Service use.
const workloadWaypointScenario = `apiVersion: v1
kind: Namespace
metadata:
  name: default
  labels: {istio.io/dataplane-mode: ambient}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: reviews-v2-pod-waypoint
  labels: {istio.io/waypoint-for: workload}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
---
apiVersion: v1
kind: Service
metadata: {name: reviews}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: reviews-v1}
spec:
  selector: {matchLabels: {app: reviews, version: v1}}
  template:
    metadata: {labels: {app: reviews, version: v1}}
    spec: {containers: [{name: reviews, image: meshlab/demoapp, ports: [{containerPort: 9080}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: reviews-v2}
spec:
  replicas: 2
  selector: {matchLabels: {app: reviews, version: v2}}
  template:
    metadata: {labels: {app: reviews, version: v2, istio.io/use-waypoint: reviews-v2-pod-waypoint}}
    spec: {containers: [{name: reviews, image: meshlab/demoapp, ports: [{containerPort: 9080}]}]}
---
apiVersion: v1
kind: Namespace
metadata:
  name: all
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
  namespace: all
  labels: {istio.io/waypoint-for: all}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: all}
spec:
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: db, namespace: all}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: meshlab/demoapp, ports: [{containerPort: 5432}]}]}
`

// waypointNamed returns the WaypointSpec of waypoint ns/name's pod in m.
func waypointNamed(t *testing.T, m *model.Model, ns, name string) WaypointSpec {
	t.Helper()
	for _, p := range m.Pods {
		if w, ok := WaypointOf(m, p); ok && w.Namespace == ns && w.Name == name {
			return w
		}
	}
	t.Fatalf("no pod of waypoint %s/%s", ns, name)
	return WaypointSpec{}
}

// mainInternalOf generates waypoint w and returns its main_internal listener and the
// range matchers of its unified matcher.
func mainInternalOf(t *testing.T, m *model.Model, w WaypointSpec) (*listener.Listener, []*xdsmatcher.IPMatcher_IPRangeMatcher) {
	t.Helper()
	res, err := GenerateWaypoint(m, w)
	if err != nil {
		t.Fatal(err)
	}
	l := findListener(t, res, MainInternalListener)
	var ipm xdsmatcher.IPMatcher
	if err := l.GetFilterChainMatcher().GetMatcherTree().GetCustomMatch().GetTypedConfig().UnmarshalTo(&ipm); err != nil {
		t.Fatal(err)
	}
	for _, r := range res[resource.ListenerType] {
		validateDeep(t, "listener", r)
	}
	return l, ipm.GetRangeMatchers()
}

// A waypoint for workload traffic matches, on main_internal, the address of every pod
// that uses it, then the application protocol (HTTP/1.1 and h2c to direct-http, anything
// else to direct-tcp), and its HTTP inspector runs on every port; a waypoint for all
// traffic has the VIPs' ranges first, then its workloads'.
func TestWaypointWorkloadChains(t *testing.T) {
	t.Parallel()
	m := buildWaypointModel(t, "workload-waypoint.yaml", []byte(workloadWaypointScenario))
	// A ServiceEntry one of whose endpoints names the workload waypoint (a lab's config
	// refuses an address that is no pod's; the model takes it).
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("vms", &networking.ServiceEntry{
		Hosts: []string{"vm.mesh.internal"}, Addresses: []string{"240.0.0.5"},
		Ports:      []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
		Resolution: networking.ServiceEntry_STATIC,
		Endpoints: []*networking.WorkloadEntry{
			{Address: "192.0.2.20", Labels: map[string]string{model.LabelUseWaypoint: "reviews-v2-pod-waypoint"}},
			{Address: "192.0.2.21"},
		},
	}))
	w := waypointNamed(t, m, "default", "reviews-v2-pod-waypoint")
	// istiod's order: by uid, the pods (Kubernetes//Pod/...) by name, then the
	// ServiceEntry's endpoint (Kubernetes/networking.istio.io/ServiceEntry/...).
	var pods []*model.Pod
	for _, p := range m.Pods {
		if p.Labels["version"] == "v2" {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *model.Pod) int { return strings.Compare(a.Name, b.Name) })
	var want []string
	for _, p := range pods {
		want = append(want, p.IP.String())
	}
	want = append(want, "192.0.2.20")
	var got []string
	for _, a := range WaypointWorkloads(m, m.Waypoint("default", "reviews-v2-pod-waypoint")) {
		got = append(got, a.String())
	}
	if len(want) != 3 || !slices.Equal(got, want) {
		t.Fatalf("WaypointWorkloads = %v, want reviews-v2's pods and the ServiceEntry's endpoint %v", got, want)
	}

	l, ranges := mainInternalOf(t, m, w)
	if len(ranges) != 1 {
		t.Fatalf("%d range matchers, want the workloads' only (the waypoint serves no service)", len(ranges))
	}
	var addrs []string
	for _, r := range ranges[0].GetRanges() {
		if r.GetPrefixLen().GetValue() != 32 {
			t.Errorf("range %s/%d, want /32", r.GetAddressPrefix(), r.GetPrefixLen().GetValue())
		}
		addrs = append(addrs, r.GetAddressPrefix())
	}
	if !slices.Equal(addrs, want) {
		t.Errorf("workload ranges %v, want %v", addrs, want)
	}
	tree := ranges[0].GetOnMatch().GetMatcher().GetMatcherTree()
	if !tree.GetInput().GetTypedConfig().MessageIs(&netinputs.ApplicationProtocolInput{}) {
		t.Errorf("workload ranges match on %s, want ApplicationProtocolInput", tree.GetInput().GetTypedConfig().GetTypeUrl())
	}
	chainOf := func(om *xdsmatcher.Matcher_OnMatch) string {
		var s wrapperspb.StringValue
		if err := om.GetAction().GetTypedConfig().UnmarshalTo(&s); err != nil {
			t.Fatal(err)
		}
		return s.GetValue()
	}
	byProto := tree.GetExactMatchMap().GetMap()
	if len(byProto) != 2 || chainOf(byProto["'http/1.1'"]) != "direct-http" || chainOf(byProto["'h2c'"]) != "direct-http" {
		t.Errorf("application protocols %v, want 'http/1.1' and 'h2c' to direct-http", byProto)
	}
	if c := chainOf(ranges[0].GetOnMatch().GetMatcher().GetOnNoMatch()); c != "direct-tcp" {
		t.Errorf("other protocols go to %q, want direct-tcp", c)
	}
	for _, f := range l.GetListenerFilters() {
		if f.GetName() == "envoy.filters.listener.http_inspector" && f.GetFilterDisabled() != nil {
			t.Errorf("HTTP inspector disabled on %v: with workloads every port may carry HTTP", f.GetFilterDisabled())
		}
	}

	// waypoint-for all: the db VIP's range first, then db's pod.
	all := waypointNamed(t, m, "all", "waypoint")
	_, ranges = mainInternalOf(t, m, all)
	var db *model.Service
	for _, s := range m.Services {
		if s.Namespace == "all" && s.Name == "db" {
			db = s
		}
	}
	var dbPod *model.Pod
	for _, p := range m.Pods {
		if p.Namespace == "all" && p.Labels["app"] == "db" {
			dbPod = p
		}
	}
	if db == nil || dbPod == nil {
		t.Fatal("no db Service or pod in namespace all")
	}
	if len(ranges) != 2 || ranges[0].GetRanges()[0].GetAddressPrefix() != db.VIP.String() ||
		len(ranges[1].GetRanges()) != 1 || ranges[1].GetRanges()[0].GetAddressPrefix() != dbPod.IP.String() {
		t.Errorf("waypoint all/waypoint ranges %v, want db's VIP %s then its pod %s", ranges, db.VIP, dbPod.IP)
	}

	// A waypoint for service traffic only takes no workload's.
	m.Waypoint("all", "waypoint").For = model.WaypointForService
	if ws := WaypointWorkloads(m, m.Waypoint("all", "waypoint")); len(ws) != 0 {
		t.Errorf("a service waypoint takes workloads %v", ws)
	}
}
