package fidelity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/test/xds"

	"github.com/meshlab/meshlab/controlplane/kubeobj"
	"github.com/meshlab/meshlab/controlplane/model"
	cpxds "github.com/meshlab/meshlab/controlplane/xds"
)

// waypointDecl is a waypoint of the scenario (model.Waypoints) with its pod, as the
// config loader makes them (Istio's deployment controller's Deployment, Service and pod).
type waypointDecl struct {
	W   *model.Waypoint
	Pod *model.Pod
}

// loadWaypointScenario loads a waypoint scenario with meshlab's loader and returns its
// model and its waypoints, each with its first pod.
func loadWaypointScenario(path string) (*model.Model, []*waypointDecl, error) {
	sc, err := loadScenario(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	m, err := sc.Build(buildOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("build model of %s: %w", path, err)
	}
	var ws []*waypointDecl
	for _, w := range m.Waypoints {
		pods := m.WaypointPods(w)
		if len(pods) == 0 {
			return nil, nil, fmt.Errorf("%s: waypoint %s has no pod", path, w.ResourceName())
		}
		ws = append(ws, &waypointDecl{W: w, Pod: pods[0]})
	}
	return m, ws, nil
}

// waypointGatewayDoc is w's Gateway as the cluster holds it once programmed
// (kubeobj.WaypointGateway, which the lab feeds istiod too).
func waypointGatewayDoc(m *model.Model, w *model.Waypoint) map[string]any {
	return kubeobj.WaypointGateway(m, w)
}

// waypointClassDoc is the GatewayClass istiod makes for waypoints.
func waypointClassDoc() map[string]any { return kubeobj.WaypointClass() }

// scenarioHTTPRoutes returns the scenario's HTTPRoutes, GRPCRoutes and TCPRoutes as
// written (with the API server's defaults), for istiod's own Gateway API conversion
// (GAMMA routes among them).
func scenarioHTTPRoutes(path string) ([]any, error) {
	sc, err := loadScenario(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	var out []any
	for _, o := range sc.Objects {
		if o.HTTPRoute == nil && o.GRPCRoute == nil && o.TCPRoute == nil {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(o.JSON, &doc); err != nil {
			return nil, fmt.Errorf("read %s: %w", o.Origin, err)
		}
		if md, ok := doc["metadata"].(map[string]any); ok {
			md["namespace"] = o.Origin.Namespace
		}
		switch {
		case o.HTTPRoute != nil:
			defaultHTTPRoute(doc)
		case o.GRPCRoute != nil:
			defaultGRPCRoute(doc)
		default:
			defaultBackends(doc)
		}
		if o.GRPCRoute != nil || o.TCPRoute != nil {
			// The API server serves a v1alpha2 GRPCRoute or TCPRoute at v1 too, the
			// version istiod watches.
			doc["apiVersion"] = "gateway.networking.k8s.io/v1"
		}
		out = append(out, doc)
	}
	return out, nil
}

// defaultHTTPRoute sets the defaults Kubernetes' API server gives an HTTPRoute from its
// CRD, which istiod's conversion relies on: a rule without matches matches PathPrefix
// "/", a match without path too; header and query matches are Exact; a backend is a core
// Service of weight 1.
func defaultHTTPRoute(doc map[string]any) {
	spec, _ := doc["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	prefix := func() map[string]any { return map[string]any{"type": "PathPrefix", "value": "/"} }
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if rule == nil {
			continue
		}
		matches, _ := rule["matches"].([]any)
		if len(matches) == 0 {
			matches = []any{map[string]any{}}
		}
		for _, mm := range matches {
			m, _ := mm.(map[string]any)
			if m == nil {
				continue
			}
			if _, ok := m["path"]; !ok {
				m["path"] = prefix()
			}
			for _, key := range []string{"headers", "queryParams"} {
				hs, _ := m[key].([]any)
				for _, h := range hs {
					if hm, ok := h.(map[string]any); ok && hm["type"] == nil {
						hm["type"] = "Exact"
					}
				}
			}
		}
		rule["matches"] = matches
	}
	defaultBackends(doc)
}

// defaultGRPCRoute sets the defaults the API server gives a GRPCRoute: method and header
// matches are Exact; a backend is a core Service of weight 1.
func defaultGRPCRoute(doc map[string]any) {
	spec, _ := doc["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		matches, _ := rule["matches"].([]any)
		for _, mm := range matches {
			m, _ := mm.(map[string]any)
			if method, ok := m["method"].(map[string]any); ok && method["type"] == nil {
				method["type"] = "Exact"
			}
			hs, _ := m["headers"].([]any)
			for _, h := range hs {
				if hm, ok := h.(map[string]any); ok && hm["type"] == nil {
					hm["type"] = "Exact"
				}
			}
		}
	}
	defaultBackends(doc)
}

// defaultBackends makes each backend of a route's rules a core Service of weight 1
// unless written otherwise, as the API server does.
func defaultBackends(doc map[string]any) {
	spec, _ := doc["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		brs, _ := rule["backendRefs"].([]any)
		for _, b := range brs {
			if bm, ok := b.(map[string]any); ok {
				if bm["group"] == nil {
					bm["group"] = ""
				}
				if bm["kind"] == nil {
					bm["kind"] = "Service"
				}
				if bm["weight"] == nil {
					bm["weight"] = 1
				}
			}
		}
	}
}

// withoutMeshRoutes returns m with the VirtualServices meshlab derives from HTTPRoutes
// whose parent is a Service left out: istiod is given the HTTPRoutes themselves.
func withoutMeshRoutes(m *model.Model) *model.Model {
	c := *m
	c.Istio.VirtualServices = nil
	for _, vs := range m.Istio.VirtualServices {
		if !model.IsMeshRoute(vs.Name) {
			c.Istio.VirtualServices = append(c.Istio.VirtualServices, vs)
		}
	}
	return &c
}

// startWaypointOracle starts istiod with ambient on over m's objects as the ambient run
// gives them (the waypoints' Services and pods among them), the waypoints' Gateways and
// their GatewayClass, and routes, the scenario's HTTPRoutes as written. The Gateways and
// routes go to both istiod's Kubernetes client (the ambient index reads them there) and
// its config store, as Istio's own waypoint tests pass them.
func startWaypointOracle(t *testing.T, m *model.Model, routes []any) (*oracle, error) {
	t.Helper()
	if !features.EnableAmbient {
		return nil, errNoAmbient
	}
	objs, err := ambientKubeObjects(m)
	if err != nil {
		return nil, fmt.Errorf("convert kubernetes objects: %w", err)
	}
	extra := []any{waypointClassDoc()}
	var gws []any
	for _, w := range m.Waypoints {
		gws = append(gws, waypointGatewayDoc(m, w))
	}
	if !strings.Contains(objs, "kind: Gateway\n") { // the ambient run may give them already
		extra = append(extra, gws...)
	}
	extra = append(extra, routes...)
	gws = append(gws, routes...)
	more, err := joinYAML(extra)
	if err != nil {
		return nil, err
	}
	cfgs, err := istioConfigs(withoutMeshRoutes(m))
	if err != nil {
		return nil, fmt.Errorf("convert istio objects: %w", err)
	}
	// Telemetries too: the waypoint's istio.stats follow them, and the mesh config
	// names the metrics provider they override (waypointMeshConfig).
	tels, err := istioDocs(m, "Telemetry")
	if err != nil {
		return nil, fmt.Errorf("convert telemetries: %w", err)
	}
	gws = append(gws, tels...)
	gwcfg, err := joinYAML(gws)
	if err != nil {
		return nil, err
	}
	fake := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: objs + "\n---\n" + more,
		ConfigString:           strings.TrimSpace(cfgs + "\n---\n" + gwcfg),
		MeshConfig:             waypointMeshConfig(m.Mesh),
		ListenerBuilder:        func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
	})
	return &oracle{fake: fake, addr: fake.Listener.Addr().String()}, nil
}

// waypointMeshConfig is meshConfig with Istio's installed default metrics provider
// (defaultProviders.metrics: prometheus, as the istiod chart sets it), so that istiod
// sends a waypoint the istio.stats filters meshlab sends (reporter SERVER_GATEWAY).
func waypointMeshConfig(mc model.MeshConfig) *meshconfig.MeshConfig {
	m := meshConfig(mc)
	m.DefaultProviders = &meshconfig.MeshConfig_DefaultProviders{Metrics: []string{"prometheus"}}
	return m
}

// waypointNodeID is the node id a waypoint's proxy announces:
// waypoint~<ip>~<pod>.<ns>~<ns>.svc.cluster.local.
func waypointNodeID(w *waypointDecl) string {
	p := w.Pod
	return fmt.Sprintf("waypoint~%s~%s.%s~%s.svc.cluster.local", p.IP, p.Name, p.Namespace, p.Namespace)
}

// waypointMetadata is the node metadata pilot-agent writes for a waypoint's proxy.
func waypointMetadata(w *waypointDecl) map[string]any {
	meta := nodeMetadata(w.Pod)
	delete(meta, "INTERCEPTION_MODE")
	return meta
}

// waypointNode is the xDS node of w's proxy, as collectIstiodNode sends it.
func waypointNode(w *waypointDecl) (*corev3.Node, error) {
	meta, err := structpb.NewStruct(waypointMetadata(w))
	if err != nil {
		return nil, fmt.Errorf("build the waypoint's node metadata: %w", err)
	}
	return &corev3.Node{Id: waypointNodeID(w), Cluster: w.W.Name + "." + w.W.Namespace, Metadata: meta}, nil
}

// waypointSpec is w as meshlab's generator takes it (discovery's xds.WaypointOf).
func waypointSpec(m *model.Model, w *waypointDecl) (cpxds.WaypointSpec, error) {
	spec, ok := cpxds.WaypointOf(m, w.Pod)
	if !ok {
		return spec, fmt.Errorf("pod %s is not waypoint %s's", w.Pod.Name, w.W.ResourceName())
	}
	return spec, nil
}

// meshlabWaypoint returns what meshlab's generator sends waypoint w, by type URL and name.
func meshlabWaypoint(m *model.Model, w *waypointDecl) (map[string]map[string]proto.Message, error) {
	spec, err := waypointSpec(m, w)
	if err != nil {
		return nil, err
	}
	gen, err := cpxds.GenerateWaypoint(m, spec)
	if err != nil {
		return nil, fmt.Errorf("generate meshlab's waypoint %s: %w", w.W.ResourceName(), err)
	}
	return byTypeURL(gen), nil
}

// writeDump writes what istiod generated, by type and name in order, as JSON: the
// reference meshlab's waypoint generator is written against.
func writeDump(path string, got map[string]map[string]proto.Message) error {
	var b bytes.Buffer
	b.WriteString("{\n")
	first := true
	for _, typ := range typeOrder {
		names := make([]string, 0, len(got[typ]))
		for n := range got[typ] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			j, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(got[typ][n])
			if err != nil {
				return fmt.Errorf("encode %s %s: %w", shortNames[typ], n, err)
			}
			if !first {
				b.WriteString(",\n")
			}
			first = false
			fmt.Fprintf(&b, "%q: %s", shortNames[typ]+" "+n, j)
		}
	}
	b.WriteString("\n}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// waypointScenarios returns the waypoint scenarios: the ratchet's own
// (testdata/waypoint/*.yaml), named waypoint-<file>.
func waypointScenarios(t *testing.T) (paths, names []string) {
	t.Helper()
	own, err := filepath.Glob(filepath.Join("testdata", "waypoint", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(own)
	for _, p := range own {
		paths, names = append(paths, p), append(names, "waypoint-"+strings.TrimSuffix(filepath.Base(p), ".yaml"))
	}
	return paths, names
}

// readDump reads a dump writeDump wrote, by type URL and name.
func readDump(path string) (map[string]map[string]proto.Message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := map[string]map[string]proto.Message{}
	for key, j := range raw {
		short, name, _ := strings.Cut(key, " ")
		var m proto.Message
		var typ string
		switch short {
		case "LDS":
			typ, m = listenerType, &listenerv3.Listener{}
		case "CDS":
			typ, m = clusterType, &clusterv3.Cluster{}
		case "RDS":
			typ, m = routeType, &routev3.RouteConfiguration{}
		case "EDS":
			typ, m = endpointType, &endpointv3.ClusterLoadAssignment{}
		default:
			return nil, fmt.Errorf("read %s: unknown type of %q", path, key)
		}
		if err := protojson.Unmarshal(j, m); err != nil {
			return nil, fmt.Errorf("read %s: %s: %w", path, key, err)
		}
		if out[typ] == nil {
			out[typ] = map[string]proto.Message{}
		}
		out[typ][name] = m
	}
	return out, nil
}
