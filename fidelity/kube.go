package fidelity

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
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

// kubeObjects returns the model's Services, Pods and EndpointSlices as the multi-document
// YAML istiod's fake Kubernetes client reads (KubernetesObjectString): pods with their
// IP, phase Running, labels and service account, one EndpointSlice per Service.
func kubeObjects(m *model.Model) (string, error) {
	var docs []any
	for _, s := range m.Services {
		docs = append(docs, kubeService(s))
	}
	for _, p := range m.Pods {
		docs = append(docs, kubePod(p))
	}
	for _, s := range m.Services {
		docs = append(docs, endpointSlice(m, s))
	}
	return joinYAML(docs)
}

func kubeService(s *model.Service) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: s.VIP.String(),
			Selector:  s.Selector,
			Type:      corev1.ServiceTypeClusterIP,
		},
	}
	for _, p := range s.Ports {
		sp := corev1.ServicePort{
			Name: p.Name, Port: int32(p.Port), Protocol: corev1.ProtocolTCP,
			TargetPort: intstr.FromInt32(int32(p.TargetPort)),
		}
		// The port name carries the protocol as meshlab chose it; appProtocol makes
		// istiod choose the same even for a port whose name says nothing.
		ap := strings.ToLower(p.Protocol.String())
		sp.AppProtocol = &ap
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
	}
	return svc
}

func kubePod(p *model.Pod) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: podLabels(p)},
		Spec: corev1.PodSpec{
			ServiceAccountName: p.ServiceAccount,
			Containers:         []corev1.Container{{Name: "app", Image: "meshlab/demoapp"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      p.IP.String(),
			PodIPs:     []corev1.PodIP{{IP: p.IP.String()}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, port := range p.Ports {
		pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: int32(port), Protocol: corev1.ProtocolTCP})
	}
	if p.Sidecar.Inject {
		pod.Annotations = map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "meshlab/proxy"})
	}
	return pod
}

// podLabels are the pod's labels as Istio's sidecar injector leaves them: a sidecar pod
// also carries security.istio.io/tlsMode=istio (which makes istiod mark its endpoints for
// mTLS) and the canonical service name and revision (from app/version, else the workload
// and "latest").
func podLabels(p *model.Pod) map[string]string {
	out := map[string]string{}
	for k, v := range p.Labels {
		out[k] = v
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

// endpointSlice is the EndpointSlice the endpoint controller writes for s: every pod the
// selector matches, ready, with the service's target ports.
func endpointSlice(m *model.Model, s *model.Service) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name + "-meshlab", Namespace: s.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: s.Name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range s.Ports {
		name, port, proto := p.Name, int32(p.TargetPort), corev1.ProtocolTCP
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto})
	}
	ready := true
	for _, p := range m.Pods {
		if p.Namespace != s.Namespace || !s.Selects(p.Labels) {
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

// istioConfigs returns the model's Istio objects as istiod's ConfigString reads them.
// The model's hosts are FQDNs already (the loader resolved short names in the object's
// namespace), which a config loaded from a string needs: it has no domain suffix.
func istioConfigs(m *model.Model) (string, error) {
	docs, err := istioDocs(m)
	if err != nil {
		return "", err
	}
	return joinYAML(docs)
}

// istioDocs returns the model's Istio objects of the given kinds (all when none is
// given) as Kubernetes objects.
func istioDocs(m *model.Model, kinds ...string) ([]any, error) {
	var docs []any
	add := func(apiVersion, kind, ns, name string, spec proto.Message) error {
		if len(kinds) > 0 && !slices.Contains(kinds, kind) {
			return nil
		}
		js, err := protojson.Marshal(spec)
		if err != nil {
			return fmt.Errorf("marshal %s %s/%s: %w", kind, ns, name, err)
		}
		var s map[string]any
		if err := yaml.Unmarshal(js, &s); err != nil {
			return fmt.Errorf("read %s %s/%s: %w", kind, ns, name, err)
		}
		docs = append(docs, map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     s,
		})
		return nil
	}
	const net, sec = "networking.istio.io/v1", "security.istio.io/v1"
	for _, c := range m.Istio.VirtualServices {
		if err := add(net, "VirtualService", c.Namespace, c.Name, c.Spec); err != nil {
			return nil, err
		}
	}
	for _, c := range m.Istio.DestinationRules {
		if err := add(net, "DestinationRule", c.Namespace, c.Name, c.Spec); err != nil {
			return nil, err
		}
	}
	for _, c := range m.Istio.ServiceEntries {
		if err := add(net, "ServiceEntry", c.Namespace, c.Name, c.Spec); err != nil {
			return nil, err
		}
	}
	for _, c := range m.Istio.PeerAuthentications {
		if err := add(sec, "PeerAuthentication", c.Namespace, c.Name, c.Spec); err != nil {
			return nil, err
		}
	}
	for _, c := range m.Istio.AuthorizationPolicies {
		if err := add(sec, "AuthorizationPolicy", c.Namespace, c.Name, c.Spec); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

func joinYAML(docs []any) (string, error) {
	parts := make([]string, 0, len(docs))
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return "", fmt.Errorf("marshal %T: %w", d, err)
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "---\n"), nil
}

// sidecarPods returns the pods that get a sidecar, in model order.
func sidecarPods(m *model.Model) []*model.Pod {
	var out []*model.Pod
	for _, p := range m.Pods {
		if p.Sidecar.Inject {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}
