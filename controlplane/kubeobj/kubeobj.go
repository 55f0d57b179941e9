// Package kubeobj writes a lab's model as the Kubernetes objects a cluster's API server
// would hold for it: Services with their VIPs, pods scheduled, ready and (for a sidecar
// pod) as Istio's injector leaves them, the EndpointSlices Kubernetes' endpoint controller
// writes, and the Istio objects. istiod's in-memory Kubernetes client reads them, both
// where istiod runs a lab (lab/istiodcp) and where it is meshlab's oracle (fidelity/):
// one writer, so that the two feed istiod the same cluster. It never imports Istio's
// code (istio.io/istio stays out of the meshlab binary).
package kubeobj

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/model"
)

// SidecarStatus is the injector's status annotation on a pod it gave a sidecar; istiod
// reads its presence.
const SidecarStatus = `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy"],"revision":"default"}`

// Service is s as the API server holds it: its labels, its VIP as the cluster IP, its
// selector and ports (appProtocol as the scenario wrote it).
func Service(s *model.Service) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: maps.Clone(s.Labels)},
		Spec: corev1.ServiceSpec{
			ClusterIP: s.VIP.String(), ClusterIPs: []string{s.VIP.String()},
			Selector: maps.Clone(s.Selector), Type: corev1.ServiceTypeClusterIP,
		},
	}
	for _, p := range s.Ports {
		sp := corev1.ServicePort{Name: p.Name, Port: int32(p.Port), Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(p.TargetPort))}
		if p.AppProtocol != "" {
			ap := p.AppProtocol
			sp.AppProtocol = &ap
		}
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
	}
	return svc
}

// Pod is p as the API server holds it once scheduled and ready: its IP, labels,
// annotations and service account ("default" when it names none, as Kubernetes fills
// in); a pod with a sidecar has what Istio's injector leaves on it (the status
// annotation, the tlsMode and canonical labels, an istio-proxy container).
func Pod(p *model.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: PodLabels(p),
			Annotations: maps.Clone(p.Annotations)},
		Spec: corev1.PodSpec{
			ServiceAccountName: cmp.Or(p.ServiceAccount, "default"),
			Containers:         []corev1.Container{{Name: "app", Image: cmp.Or(p.App.Image, "meshlab/demoapp")}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: p.IP.String(), PodIPs: []corev1.PodIP{{IP: p.IP.String()}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, port := range p.Ports {
		out.Spec.Containers[0].Ports = append(out.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: int32(port), Protocol: corev1.ProtocolTCP})
	}
	if p.Sidecar.Inject {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations["sidecar.istio.io/status"] = SidecarStatus
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "meshlab/proxy"})
	}
	return out
}

// SetController gives pod, p as the API server holds it, what its controller gives a pod
// of a Kubernetes workload: a generated name and the controller's owner reference (a
// Deployment's pods are owned by its ReplicaSet <deployment>-<pod-template-hash>; a
// StatefulSet's and a DaemonSet's by the workload). istiod names a pod's workload from
// them (a Workload's workload_name, ztunnel's and the proxies' workload labels); a pod of
// meshlab's own Workload kind, or a bare Pod, has neither.
func SetController(pod *corev1.Pod, p *model.Pod) {
	kind, name := p.Origin.Kind, p.Workload
	switch kind {
	case "Deployment":
		hash := p.Labels["pod-template-hash"]
		if hash == "" {
			return
		}
		kind, name = "ReplicaSet", p.Workload+"-"+hash
	case "StatefulSet", "DaemonSet":
	default:
		return
	}
	controller := true
	pod.GenerateName = name + "-"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: &controller}}
}

// PodLabels are the pod's labels as Istio's injector leaves them: a sidecar pod also
// carries security.istio.io/tlsMode=istio (which makes istiod mark its endpoints for
// mTLS) and the canonical service name and revision (from app/version, else the
// workload and "latest").
func PodLabels(p *model.Pod) map[string]string {
	out := maps.Clone(p.Labels)
	if out == nil {
		out = map[string]string{}
	}
	if !p.Sidecar.Inject {
		return out
	}
	out["security.istio.io/tlsMode"] = "istio"
	if _, ok := out["service.istio.io/canonical-name"]; !ok {
		out["service.istio.io/canonical-name"] = cmp.Or(p.Labels["app.kubernetes.io/name"], p.Labels["app"], p.Workload)
	}
	if _, ok := out["service.istio.io/canonical-revision"]; !ok {
		out["service.istio.io/canonical-revision"] = cmp.Or(p.Labels["app.kubernetes.io/version"], p.Labels["version"], "latest")
	}
	return out
}

// EndpointSlice is what Kubernetes' endpoint controller writes for s: every pod with an
// address that its selector matches, ready, on the target ports.
func EndpointSlice(m *model.Model, s *model.Service) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-meshlab", Namespace: s.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range s.Ports {
		name, port, proto := p.Name, int32(p.TargetPort), corev1.ProtocolTCP
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto})
	}
	ready := true
	for _, p := range m.Pods {
		if p.Namespace != s.Namespace || !s.Selects(p.Labels) || !p.IP.IsValid() {
			continue
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: p.Name, Namespace: p.Namespace},
		})
	}
	return es
}

// IstioObjects returns the model's Istio objects of the given kinds (all when none is
// given) as a cluster holds them, hosts as the loader resolved them (FQDNs, which a
// config read from a string needs: it has no domain suffix).
func IstioObjects(m *model.Model, kinds ...string) ([]any, error) {
	var docs []any
	var errs []error
	addAnnotated := func(apiVersion, kind, ns, name string, spec proto.Message, annotations map[string]string) {
		if len(kinds) > 0 && !slices.Contains(kinds, kind) {
			return
		}
		js, err := protojson.Marshal(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("marshal %s %s/%s: %w", kind, ns, name, err))
			return
		}
		var s map[string]any
		if err := yaml.Unmarshal(js, &s); err != nil {
			errs = append(errs, fmt.Errorf("read %s %s/%s: %w", kind, ns, name, err))
			return
		}
		meta := map[string]any{"name": name, "namespace": ns}
		if len(annotations) > 0 {
			meta["annotations"] = maps.Clone(annotations)
		}
		docs = append(docs, map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta, "spec": s})
	}
	add := func(apiVersion, kind, ns, name string, spec proto.Message) {
		addAnnotated(apiVersion, kind, ns, name, spec, nil)
	}
	const net, sec = "networking.istio.io/v1", "security.istio.io/v1"
	for _, c := range m.Istio.VirtualServices {
		add(net, "VirtualService", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.DestinationRules {
		add(net, "DestinationRule", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.ServiceEntries {
		add(net, "ServiceEntry", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.Gateways {
		add(net, "Gateway", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.PeerAuthentications {
		add(sec, "PeerAuthentication", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.AuthorizationPolicies {
		// Its annotations go with it: istio.io/dry-run decides where istiod puts its rules.
		addAnnotated(sec, "AuthorizationPolicy", c.Namespace, c.Name, c.Spec, c.Annotations)
	}
	for _, c := range m.Istio.RequestAuthentications {
		add(sec, "RequestAuthentication", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.Telemetries {
		add("telemetry.istio.io/v1", "Telemetry", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.Sidecars {
		add(net, "Sidecar", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range m.Istio.TrafficExtensions {
		add("extensions.istio.io/v1alpha1", "TrafficExtension", c.Namespace, c.Name, c.Spec)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return docs, nil
}

// WaypointGateway is waypoint w's Gateway as the cluster holds it once Istio's deployment
// controller programmed it: its status carries the waypoint Service's address and
// hostname, without which istiod's ambient index ignores it.
func WaypointGateway(m *model.Model, w *model.Waypoint) map[string]any {
	var addrs []any
	if s := m.WaypointService(w); s != nil {
		addrs = append(addrs, map[string]any{"type": "IPAddress", "value": s.VIP.String()})
	}
	addrs = append(addrs, map[string]any{"type": "Hostname", "value": w.Hostname()})
	listener := map[string]any{"name": model.WaypointListener, "port": model.WaypointPort, "protocol": "HBONE"}
	if w.From != "" && w.From != "Same" {
		ns := map[string]any{"from": w.From}
		if len(w.FromSelector) > 0 {
			ns["selector"] = map[string]any{"matchLabels": w.FromSelector}
		}
		listener["allowedRoutes"] = map[string]any{"namespaces": ns}
	}
	labels := map[string]any{}
	for k, v := range w.Labels {
		labels[k] = v
	}
	return map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": w.Name, "namespace": w.Namespace, "labels": labels},
		"spec":     map[string]any{"gatewayClassName": model.WaypointGatewayClass, "listeners": []any{listener}},
		"status":   map[string]any{"addresses": addrs},
	}
}

// WaypointClass is the GatewayClass istiod makes for waypoints.
func WaypointClass() map[string]any {
	return map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": model.WaypointGatewayClass},
		"spec":     map[string]any{"controllerName": model.WaypointController},
	}
}

// JoinYAML writes docs as one multi-document YAML, in order.
func JoinYAML(docs []any) ([]byte, error) {
	parts := make([]string, 0, len(docs))
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("marshal %T: %w", d, err)
		}
		parts = append(parts, string(b))
	}
	return []byte(strings.Join(parts, "---\n")), nil
}
