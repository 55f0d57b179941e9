package fidelity

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/test/xds"
	istioworkload "istio.io/istio/pkg/workloadapi"
	istiosecurity "istio.io/istio/pkg/workloadapi/security"

	"github.com/meshlab/meshlab/controlplane/kubeobj"
	"github.com/meshlab/meshlab/controlplane/model"
)

// The two resource types istiod serves ztunnel (WDS), by type URL.
const (
	addressType       = "type.googleapis.com/istio.workload.Address"
	authorizationType = "type.googleapis.com/istio.security.Authorization"
)

// ambientTypes is the order ambient tables and lists print the types in.
var ambientTypes = []string{addressType, authorizationType}

func init() {
	shortNames[addressType] = "WDS"
	shortNames[authorizationType] = "WADS"
}

// The ambient oracle runs istiod as the lab's one node sees it: a lab is named for its
// scenario's run here, and its node (the name every enrolled pod's Workload carries and
// ztunnel announces as NODE_NAME) is ml-<lab>-node, as the lab names it.
const (
	ambientLab  = "fidelity"
	ambientNode = "ml-" + ambientLab + "-node"
	// ztunnelIP is the address the oracle's ztunnel announces in its node id: outside the
	// pods' range, as the lab's ztunnel pod is.
	ztunnelIP  = "10.244.255.254"
	ztunnelPod = "ztunnel-fidelity"
)

// ambientMode reports whether this process runs istiod with ambient on. Istio fixes its
// ambient flags at package init from PILOT_ENABLE_AMBIENT (see docs/FIDELITY.md), so the
// mode is the process's: `make fidelity` runs the ambient checks as a go test of their own
// with PILOT_ENABLE_AMBIENT=true and the sidecar checks without it.
func ambientMode() bool { return os.Getenv("PILOT_ENABLE_AMBIENT") == "true" }

// ambientKubeObjects returns what istiod's ambient index reads for m, as kube objects: the
// sidecar run's Services (with their appProtocol as written and the API server's IP family
// defaults), Pods (with their controller) and EndpointSlices, plus the scenario's Namespaces with
// their labels, the node, every pod scheduled on it with its annotations (among them the
// redirection annotation enroll puts on ambient pods), and the Istio objects the index
// watches as CRDs (AuthorizationPolicy, PeerAuthentication, ServiceEntry).
func ambientKubeObjects(m *model.Model) (string, error) {
	docs := []any{&corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: ambientNode},
	}}
	for _, ns := range m.Namespaces {
		docs = append(docs, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels, Annotations: ns.Annotations},
		})
	}
	for _, s := range m.Services {
		svc := kubeService(s)
		// The API server's defaults for a Service of a single-stack IPv4 cluster.
		single := corev1.IPFamilyPolicySingleStack
		svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
		// istiod's ambient index classifies a port by its name and appProtocol as written,
		// not by the protocol meshlab chose for it (which the sidecar run writes there).
		for i, sp := range s.Ports {
			svc.Spec.Ports[i].AppProtocol = nil
			if sp.AppProtocol != "" {
				svc.Spec.Ports[i].AppProtocol = &sp.AppProtocol
			}
		}
		docs = append(docs, svc)
	}
	for _, p := range m.Pods {
		pod := kubePod(p)
		pod.Spec.NodeName = ambientNode
		kubeobj.SetController(pod, p)
		if len(p.Annotations) > 0 && pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for k, v := range p.Annotations {
			pod.Annotations[k] = v
		}
		docs = append(docs, pod)
	}
	for _, s := range m.Services {
		docs = append(docs, endpointSlice(m, s))
	}
	for _, w := range m.Waypoints {
		docs = append(docs, waypointGateway(m, w))
	}
	istio, err := istioDocs(m, "AuthorizationPolicy", "PeerAuthentication", "ServiceEntry")
	if err != nil {
		return "", err
	}
	return joinYAML(append(docs, istio...))
}

// waypointGateway returns waypoint w as the Gateway istiod's ambient index reads, with
// the status Istio's deployment controller writes once the waypoint's pod is ready (the
// index ignores a Gateway without status addresses): its Service's VIP and hostname, as
// the istio-waypoint class reports both address types.
func waypointGateway(m *model.Model, w *model.Waypoint) *gwv1.Gateway {
	gw := &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: w.Labels},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: model.WaypointGatewayClass,
			Listeners:        []gwv1.Listener{{Name: model.WaypointListener, Port: model.WaypointPort, Protocol: "HBONE"}},
		},
	}
	if w.From != "" && w.From != string(gwv1.NamespacesFromSame) {
		from := gwv1.FromNamespaces(w.From)
		ns := &gwv1.RouteNamespaces{From: &from}
		if len(w.FromSelector) > 0 {
			ns.Selector = &metav1.LabelSelector{MatchLabels: w.FromSelector}
		}
		gw.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: ns}
	}
	ip, host := gwv1.IPAddressType, gwv1.HostnameAddressType
	if s := m.WaypointService(w); s != nil {
		gw.Status.Addresses = append(gw.Status.Addresses, gwv1.GatewayStatusAddress{Type: &ip, Value: s.VIP.String()})
	}
	gw.Status.Addresses = append(gw.Status.Addresses, gwv1.GatewayStatusAddress{Type: &host, Value: w.Hostname()})
	return gw
}

// ambientPods returns the pods of m in ambient mode.
func ambientPods(m *model.Model) []*model.Pod {
	var out []*model.Pod
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient {
			out = append(out, p)
		}
	}
	return out
}

// enroll does what the lab's node agent does once a pod in ambient mode has its traffic
// redirected to ztunnel: it marks the pod with the redirection annotation, which is all
// istiod reads to call a pod HBONE. Both generators then see the lab as it runs.
func enroll(m *model.Model) {
	for _, p := range ambientPods(m) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[model.AnnotationAmbientRedirection] = model.AmbientRedirectionEnabled
	}
}

// ztunnelNode is the xDS node ztunnel announces (its src/xds/client.rs): id
// ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local and the metadata istiod reads from it.
func ztunnelNode() (*corev3.Node, error) {
	meta, err := structpb.NewStruct(map[string]any{
		"NAME":         ztunnelPod,
		"NAMESPACE":    "istio-system",
		"INSTANCE_IPS": ztunnelIP,
		"NODE_NAME":    ambientNode,
		"CLUSTER_ID":   "Kubernetes",
	})
	if err != nil {
		return nil, fmt.Errorf("build ztunnel's node metadata: %w", err)
	}
	return &corev3.Node{
		Id:       fmt.Sprintf("ztunnel~%s~%s.istio-system~istio-system.svc.cluster.local", ztunnelIP, ztunnelPod),
		Metadata: meta,
	}, nil
}

// collectWDS subscribes to istiod's WDS as ztunnel does (delta ADS, wildcard, Address
// then Authorization) and returns what it holds once istiod has answered both and then
// sent nothing for settle: by type URL and resource name, decoded as Istio's own types
// (meshlab's ambientapi shares their proto names, so the global registry may hold either).
func collectWDS(ctx context.Context, addr string, settle time.Duration) (map[string]map[string]proto.Message, error) {
	node, err := ztunnelNode()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial istiod: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("open delta ADS stream to istiod: %w", err)
	}
	for _, typ := range ambientTypes {
		if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typ}); err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", shortNames[typ], err)
		}
	}
	got := map[string]map[string]proto.Message{}
	type recv struct {
		resp *discoveryv3.DeltaDiscoveryResponse
		err  error
	}
	ch := make(chan recv)
	go func() {
		for {
			resp, err := stream.Recv()
			select {
			case ch <- recv{resp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var quiet <-chan time.Time
		if len(got) == len(ambientTypes) {
			quiet = time.After(settle)
		}
		select {
		case <-quiet:
			return got, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for istiod's WDS (have %v): %w", typesGot(got), ctx.Err())
		case r := <-ch:
			if r.err != nil {
				return nil, fmt.Errorf("receive from istiod (have %v): %w", typesGot(got), r.err)
			}
			if err := applyDelta(got, r.resp); err != nil {
				return nil, err
			}
			ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.resp.GetTypeUrl(), ResponseNonce: r.resp.GetNonce()}
			if err := stream.Send(ack); err != nil {
				return nil, fmt.Errorf("ack %s: %w", shortNames[r.resp.GetTypeUrl()], err)
			}
		}
	}
}

// applyDelta folds one delta response into got: its resources decoded as Istio's types,
// its removed names dropped.
func applyDelta(got map[string]map[string]proto.Message, resp *discoveryv3.DeltaDiscoveryResponse) error {
	typ := resp.GetTypeUrl()
	if got[typ] == nil {
		got[typ] = map[string]proto.Message{}
	}
	for _, r := range resp.GetResources() {
		var m proto.Message
		switch typ {
		case addressType:
			m = &istioworkload.Address{}
		case authorizationType:
			m = &istiosecurity.Authorization{}
		default:
			return fmt.Errorf("istiod sent ztunnel a %s", typ)
		}
		if err := proto.Unmarshal(r.GetResource().GetValue(), m); err != nil {
			return fmt.Errorf("decode %s %s from istiod: %w", shortNames[typ], r.GetName(), err)
		}
		got[typ][r.GetName()] = m
	}
	for _, n := range resp.GetRemovedResources() {
		delete(got[typ], n)
	}
	return nil
}

// wdsName is the name istiod gives a WDS resource: a workload's uid, a service's
// <namespace>/<hostname>, a policy's <namespace>/<name>.
func wdsName(m proto.Message) string {
	switch r := m.(type) {
	case *istioworkload.Address:
		if w := r.GetWorkload(); w != nil {
			return w.GetUid()
		}
		return r.GetService().GetNamespace() + "/" + r.GetService().GetHostname()
	case *istiosecurity.Authorization:
		return r.GetNamespace() + "/" + r.GetName()
	}
	return ""
}

// asIstio re-reads one of meshlab's WDS messages as Istio's type of the same wire schema
// (TestAmbientProtosMatchIstio holds them equal), so the diff compares like with like.
func asIstio(m proto.Message) (proto.Message, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	var out proto.Message
	switch name := m.ProtoReflect().Descriptor().FullName(); name {
	case "istio.workload.Address":
		out = &istioworkload.Address{}
	case "istio.security.Authorization":
		out = &istiosecurity.Authorization{}
	default:
		return nil, fmt.Errorf("not a WDS resource: %s", name)
	}
	if err := proto.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("read %T as Istio's: %w", m, err)
	}
	return out, nil
}

var errNoAmbient = errors.New("PILOT_ENABLE_AMBIENT=true is not set: istiod would refuse a ztunnel")

// startAmbientOracle starts the fake istiod with ambient on (the process's
// PILOT_ENABLE_AMBIENT) over m's objects as its ambient index reads them; it stops with
// the test.
func startAmbientOracle(t *testing.T, m *model.Model) (*oracle, error) {
	t.Helper()
	if !features.EnableAmbient {
		return nil, errNoAmbient
	}
	objs, err := ambientKubeObjects(m)
	if err != nil {
		return nil, fmt.Errorf("convert kubernetes objects: %w", err)
	}
	cfgs, err := istioConfigs(m)
	if err != nil {
		return nil, fmt.Errorf("convert istio objects: %w", err)
	}
	fake := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: objs,
		ConfigString:           cfgs,
		MeshConfig:             meshConfig(m.Mesh),
		ListenerBuilder:        func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
	})
	return &oracle{fake: fake, addr: fake.Listener.Addr().String()}, nil
}
