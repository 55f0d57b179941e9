package istiodcp

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/kubeobj"
	"github.com/meshlab/meshlab/controlplane/model"
)

// Objects returns everything the lab's model holds as the Kubernetes objects a cluster's
// API server would hold for it, as multi-document YAML in a stable order: namespaces,
// service accounts, Services with their VIPs, pods with their IPs, labels, readiness and
// the injector's status annotation, one EndpointSlice per Service as the endpoint
// controller writes it, the gateways' TLS Secrets, and the Istio objects (hosts as the
// loader resolved them: FQDNs), and the waypoints' Gateways, programmed (with their
// status addresses), and their GatewayClass. Every pod is scheduled on node, the lab's
// one node, which comes first, and owned by its controller (kubeobj.SetController).
func Objects(m *model.Model, node string) ([]byte, error) {
	var docs []any
	if node != "" {
		docs = append(docs, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: node}})
	}
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
		docs = append(docs, kubeobj.Service(s))
	}
	for _, p := range m.Pods {
		pod := kubeobj.Pod(p)
		pod.Spec.NodeName = node
		kubeobj.SetController(pod, p)
		docs = append(docs, pod)
	}
	for _, s := range m.Services {
		docs = append(docs, kubeobj.EndpointSlice(m, s))
	}
	for _, s := range m.Secrets {
		docs = append(docs, secret(s))
	}
	cms, err := ConfigMaps(m.Mesh)
	if err != nil {
		return nil, err
	}
	for _, cm := range cms {
		docs = append(docs, cm)
	}
	cfgs, err := kubeobj.IstioObjects(m)
	if err != nil {
		return nil, err
	}
	docs = append(docs, cfgs...)
	if len(m.Waypoints) > 0 {
		docs = append(docs, kubeobj.WaypointClass())
	}
	for _, w := range m.Waypoints {
		docs = append(docs, kubeobj.WaypointGateway(m, w))
	}
	return kubeobj.JoinYAML(docs)
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

// Istio's own ConfigMaps in istio-system, as its install writes them: the mesh config
// istiod's mesh watcher reads (MeshConfigMap, key mesh) and the injector's values and
// policy (InjectorConfigMap). meshlab-istiod applies a change of the first to istiod's
// mesh watcher when it arrives, as istiod does on the watch event.
const (
	MeshConfigMap     = "istio"
	InjectorConfigMap = "istio-sidecar-injector"
)

// injectorValues are the injector's Helm values a default install writes; the lab
// injects sidecars itself, so they only say what an install would.
const injectorValues = `{"global":{"hub":"docker.io/istio","istioNamespace":"istio-system","proxy":{"image":"proxyv2"}},"revision":"","sidecarInjectorWebhook":{"rewriteAppHTTPProbe":true}}`

// ConfigMaps returns Istio's own ConfigMaps for the lab's mesh settings, the mesh
// config first (kubectl's view of the lab shows them as well).
func ConfigMaps(mc model.MeshConfig) ([]*corev1.ConfigMap, error) {
	mesh, err := MeshConfig(mc)
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "istio-system",
				Labels: map[string]string{"istio.io/rev": "default", "app.kubernetes.io/name": "istiod"}},
			Data: data,
		}
	}
	return []*corev1.ConfigMap{
		cm(MeshConfigMap, map[string]string{"mesh": string(mesh), "meshNetworks": "networks: {}"}),
		cm(InjectorConfigMap, map[string]string{"values": injectorValues, "config": "policy: enabled\nalwaysInjectSelector: []\nneverInjectSelector: []\n"}),
	}, nil
}

// MeshConfig returns the lab's mesh-wide settings as istiod's MeshConfig YAML, which
// istiod lays over its defaults: the outbound policy, root namespace, access logs and
// trust domain (with its aliases).
// Each field is written out (a zero enum such as REGISTRY_ONLY included), so that none
// falls back to Istio's default. Istio's default metrics provider is named as Istio's
// chart writes it into the istio ConfigMap (defaultProviders.metrics: [prometheus], the
// prometheus provider being one of istiod's built-in extension providers): istiod gives
// sidecars, gateways and waypoints their istio.stats filters only with one, and
// meshlab's generator, like a cluster, assumes it.
func MeshConfig(mc model.MeshConfig) ([]byte, error) {
	m := map[string]any{
		"defaultProviders":      map[string]any{"metrics": []string{"prometheus"}},
		"rootNamespace":         mc.Root(),
		"outboundTrafficPolicy": map[string]any{"mode": mc.OutboundTrafficPolicy.String()},
		"accessLogFile":         mc.AccessLogPath(),
		"accessLogFormat":       mc.AccessLogFormat,
		"accessLogEncoding":     meshconfig.MeshConfig_TEXT.String(),
	}
	if mc.AccessLogEncoding == model.AccessLogJSON {
		m["accessLogEncoding"] = meshconfig.MeshConfig_JSON.String()
	}
	m["trustDomain"] = mc.Domain()
	if len(mc.TrustDomainAliases) > 0 {
		m["trustDomainAliases"] = mc.TrustDomainAliases
	}
	if mc.MeshMTLSMinTLS13 {
		m["meshMTLS"] = map[string]any{"minProtocolVersion": meshconfig.MeshConfig_TLSConfig_TLSV1_3.String()}
	}
	return yaml.Marshal(m)
}
