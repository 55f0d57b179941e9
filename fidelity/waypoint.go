package fidelity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
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
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/test/xds"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	cpxds "github.com/meshlab/meshlab/controlplane/xds"
)

// waypointClass is the GatewayClass istiod makes waypoints of.
const waypointClass = "istio-waypoint"

// waypointDecl is a waypoint a scenario declares (a Gateway of class istio-waypoint) with
// what Istio's deployment controller makes for it: a pod running the waypoint proxy and a
// Service `<name>` with port mesh 15008 (appProtocol hbone) selecting it.
type waypointDecl struct {
	Name, Namespace string
	For             string // istio.io/waypoint-for: service (the default), workload, all, none
	Pod             *model.Pod
	VIP             netip.Addr
}

// The addresses the oracle gives the i-th waypoint's pod and Service: outside what the
// loader allocates to the scenario's pods and services, as the lab's are.
func waypointIP(i int) netip.Addr  { return netip.AddrFrom4([4]byte{10, 244, 254, byte(i + 1)}) }
func waypointVIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, 254, byte(i + 1)}) }

// loadWaypointScenario loads a waypoint scenario: its waypoint Gateways as the oracle
// reads them, and every other object with meshlab's loader. (meshlab's loader learns the
// waypoint Gateway in controlplane/config; until then the harness reads it from the file.)
func loadWaypointScenario(path string) (*model.Model, []*waypointDecl, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var rest [][]byte
	var ws []*waypointDecl
	for _, doc := range splitDocs(data) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				GatewayClassName string `json:"gatewayClassName"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		if obj.Kind != "Gateway" || obj.Spec.GatewayClassName != waypointClass {
			rest = append(rest, doc)
			continue
		}
		ns := obj.Metadata.Namespace
		if ns == "" {
			ns = "default"
		}
		w := &waypointDecl{Name: obj.Metadata.Name, Namespace: ns, For: obj.Metadata.Labels["istio.io/waypoint-for"], VIP: waypointVIP(len(ws))}
		if w.For == "" {
			w.For = "service"
		}
		w.Pod = &model.Pod{
			Name: w.Name + "-5c9f8d7b6-wp" + fmt.Sprint(len(ws)), Namespace: ns, Workload: w.Name,
			ServiceAccount: w.Name, IP: waypointIP(len(ws)),
			Labels: map[string]string{
				"gateway.networking.k8s.io/gateway-name": w.Name,
				"gateway.istio.io/managed":               "istio.io-mesh-controller",
				model.LabelDataplaneMode:                 model.DataplaneModeNone,
				"service.istio.io/canonical-name":        w.Name,
				"service.istio.io/canonical-revision":    "latest",
				"sidecar.istio.io/inject":                "false",
			},
		}
		ws = append(ws, w)
	}
	sc, err := config.Load(filepath.Base(path), bytes.Join(rest, []byte("\n---\n")))
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	m, err := sc.Build(buildOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("build model of %s: %w", path, err)
	}
	return m, ws, nil
}

// splitDocs splits a multi-document YAML file at its "---" lines, dropping empty documents.
func splitDocs(data []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func stripComments(d []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// waypointKubeObjects are the kube objects of a waypoint as a cluster has them once its
// deployment is ready: the Gateway (with the status address the ambient index needs),
// its GatewayClass, its pod, Service and EndpointSlice.
func waypointKubeObjects(ws []*waypointDecl) []any {
	docs := []any{map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": waypointClass},
		"spec":     map[string]any{"controllerName": "istio.io/mesh-controller"},
	}}
	for _, w := range ws {
		docs = append(docs, waypointGateway(w))
		pod := kubePod(w.Pod)
		pod.Spec.Containers = []corev1.Container{{Name: "istio-proxy", Image: "meshlab/proxy"}}
		pod.Spec.NodeName = ambientNode
		docs = append(docs, pod)
		hbone, port, proto := "hbone", int32(15008), corev1.ProtocolTCP
		managed := map[string]string{
			"gateway.istio.io/managed":               "istio.io-mesh-controller",
			"gateway.networking.k8s.io/gateway-name": w.Name,
		}
		single := corev1.IPFamilyPolicySingleStack
		docs = append(docs, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: managed},
			Spec: corev1.ServiceSpec{
				ClusterIP: w.VIP.String(), Type: corev1.ServiceTypeClusterIP,
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Selector: map[string]string{"gateway.networking.k8s.io/gateway-name": w.Name},
				Ports: []corev1.ServicePort{{
					Name: "mesh", Port: port, Protocol: proto, AppProtocol: &hbone, TargetPort: intstr.FromInt32(port),
				}},
			},
		})
		ready, name := true, "mesh"
		docs = append(docs, &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name: w.Name + "-meshlab", Namespace: w.Namespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: w.Name},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{w.Pod.IP.String()},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: w.Pod.Name, Namespace: w.Namespace},
			}},
		})
	}
	return docs
}

// waypointGateway is w's Gateway as the cluster holds it once programmed: its status
// carries the Service's hostname, without which istiod's ambient index ignores it.
func waypointGateway(w *waypointDecl) map[string]any {
	return map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{
			"name": w.Name, "namespace": w.Namespace,
			"labels": map[string]any{"istio.io/waypoint-for": w.For},
		},
		"spec": map[string]any{
			"gatewayClassName": waypointClass,
			"listeners":        []any{map[string]any{"name": "mesh", "port": 15008, "protocol": "HBONE"}},
		},
		"status": map[string]any{"addresses": []any{map[string]any{
			"type": "Hostname", "value": w.Name + "." + w.Namespace + ".svc.cluster.local",
		}}},
	}
}

// startWaypointOracle starts istiod with ambient on over m's objects and the waypoints'.
// The Gateways go to both its Kubernetes client (the ambient index reads them there) and
// its config store (its Gateway API controller), as Istio's own waypoint tests pass them.
func startWaypointOracle(t *testing.T, m *model.Model, ws []*waypointDecl) (*oracle, error) {
	t.Helper()
	if !features.EnableAmbient {
		return nil, errNoAmbient
	}
	objs, err := ambientKubeObjects(m)
	if err != nil {
		return nil, fmt.Errorf("convert kubernetes objects: %w", err)
	}
	wobjs, err := joinYAML(waypointKubeObjects(ws))
	if err != nil {
		return nil, err
	}
	cfgs, err := istioConfigs(m)
	if err != nil {
		return nil, fmt.Errorf("convert istio objects: %w", err)
	}
	var gws []any
	for _, w := range ws {
		gws = append(gws, waypointGateway(w))
	}
	gwcfg, err := joinYAML(gws)
	if err != nil {
		return nil, err
	}
	fake := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: objs + "\n---\n" + wobjs,
		ConfigString:           strings.TrimSpace(cfgs + "\n---\n" + gwcfg),
		MeshConfig:             meshConfig(m.Mesh),
		ListenerBuilder:        func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
	})
	return &oracle{fake: fake, addr: fake.Listener.Addr().String()}, nil
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
	return &corev3.Node{Id: waypointNodeID(w), Cluster: w.Name + "." + w.Namespace, Metadata: meta}, nil
}

// waypointSpec is w as meshlab's generator takes it.
func waypointSpec(w *waypointDecl) cpxds.WaypointSpec {
	return cpxds.WaypointSpec{Name: w.Name, Namespace: w.Namespace, For: w.For, IP: w.Pod.IP, VIP: w.VIP}
}

// meshlabWaypoint returns what meshlab's generator sends waypoint w, by type URL and name.
func meshlabWaypoint(m *model.Model, w *waypointDecl) (map[string]map[string]proto.Message, error) {
	gen, err := cpxds.GenerateWaypoint(m, waypointSpec(w))
	if err != nil {
		return nil, fmt.Errorf("generate meshlab's waypoint %s/%s: %w", w.Namespace, w.Name, err)
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
