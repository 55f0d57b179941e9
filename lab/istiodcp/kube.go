package istiodcp

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Objects returns everything the lab's model holds as the Kubernetes objects a cluster's
// API server would hold for it, as multi-document YAML in a stable order: namespaces,
// service accounts, Services with their VIPs, pods with their IPs, labels, readiness and
// the injector's status annotation, one EndpointSlice per Service as the endpoint
// controller writes it, the gateways' TLS Secrets, and the Istio objects (hosts as the
// loader resolved them: FQDNs).
func Objects(m *model.Model) ([]byte, error) {
	var docs []any
	nss := map[string]bool{"istio-system": true}
	for _, p := range m.Pods {
		nss[p.Namespace] = true
	}
	for _, s := range m.Services {
		nss[s.Namespace] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(nss)) {
		obj := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if d := m.Namespace(ns); d != nil {
			obj.Labels, obj.Annotations = maps.Clone(d.Labels), maps.Clone(d.Annotations)
		}
		docs = append(docs, obj)
	}
	sas := map[string]bool{}
	for _, p := range m.Pods {
		sa := cmp.Or(p.ServiceAccount, "default")
		if key := p.Namespace + "/" + sa; !sas[key] {
			sas[key] = true
			docs = append(docs, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
				ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: p.Namespace}})
		}
	}
	for _, s := range m.Services {
		docs = append(docs, service(s))
	}
	for _, p := range m.Pods {
		docs = append(docs, pod(p))
	}
	for _, s := range m.Services {
		docs = append(docs, endpointSlice(m, s))
	}
	for _, s := range m.Secrets {
		docs = append(docs, secret(s))
	}
	cfgs, err := istioObjects(m)
	if err != nil {
		return nil, err
	}
	docs = append(docs, cfgs...)
	return joinYAML(docs)
}

func service(s *model.Service) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
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

// secret is a TLS Secret a gateway serves by credentialName, as kubectl create secret tls
// (and generic, with ca.crt for MUTUAL) makes it.
func secret(s *model.Secret) *corev1.Secret {
	out := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: s.Cert, corev1.TLSPrivateKeyKey: s.Key},
	}
	if s.CACert != nil {
		out.Data["ca.crt"] = s.CACert
	}
	return out
}

// pod is p as the API server holds it once scheduled and ready; a pod with a sidecar has
// what Istio's injector leaves on it (the status annotation, the tlsMode and canonical
// labels, an istio-proxy container).
func pod(p *model.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: podLabels(p),
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
		out.Annotations["sidecar.istio.io/status"] = `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy"],"revision":"default"}`
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "meshlab/proxy"})
	}
	return out
}

// podLabels are the pod's labels as Istio's injector leaves them on a sidecar pod.
func podLabels(p *model.Pod) map[string]string {
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

// endpointSlice is what Kubernetes' endpoint controller writes for s: every pod its
// selector matches, ready, on the target ports.
func endpointSlice(m *model.Model, s *model.Service) *discoveryv1.EndpointSlice {
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

// istioObjects returns the model's Istio objects as a cluster holds them.
func istioObjects(m *model.Model) ([]any, error) {
	var docs []any
	add := func(apiVersion, kind, ns, name string, spec proto.Message) error {
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
	var errs []error
	for _, c := range m.Istio.VirtualServices {
		errs = append(errs, add(net, "VirtualService", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.DestinationRules {
		errs = append(errs, add(net, "DestinationRule", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.ServiceEntries {
		errs = append(errs, add(net, "ServiceEntry", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.Gateways {
		errs = append(errs, add(net, "Gateway", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.PeerAuthentications {
		errs = append(errs, add(sec, "PeerAuthentication", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.AuthorizationPolicies {
		errs = append(errs, add(sec, "AuthorizationPolicy", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.RequestAuthentications {
		errs = append(errs, add(sec, "RequestAuthentication", c.Namespace, c.Name, c.Spec))
	}
	for _, c := range m.Istio.Telemetries {
		errs = append(errs, add("telemetry.istio.io/v1", "Telemetry", c.Namespace, c.Name, c.Spec))
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// MeshConfig returns the lab's mesh-wide settings as istiod's MeshConfig YAML, which
// istiod lays over its defaults: the outbound policy, root namespace and access logs.
// Each field is written out (a zero enum such as REGISTRY_ONLY included), so that none
// falls back to Istio's default.
func MeshConfig(mc model.MeshConfig) ([]byte, error) {
	m := map[string]any{
		"rootNamespace":         mc.Root(),
		"outboundTrafficPolicy": map[string]any{"mode": mc.OutboundTrafficPolicy.String()},
		"accessLogFile":         mc.AccessLogPath(),
		"accessLogFormat":       mc.AccessLogFormat,
		"accessLogEncoding":     meshconfig.MeshConfig_TEXT.String(),
	}
	if mc.AccessLogEncoding == model.AccessLogJSON {
		m["accessLogEncoding"] = meshconfig.MeshConfig_JSON.String()
	}
	return yaml.Marshal(m)
}

func joinYAML(docs []any) ([]byte, error) {
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
