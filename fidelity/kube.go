package fidelity

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meshlab/meshlab/controlplane/kubeobj"
	"github.com/meshlab/meshlab/controlplane/model"
)

// The model is written as Kubernetes objects by controlplane/kubeobj, the writer that
// feeds istiod a running lab (lab/istiodcp) too; what the oracle changes is here.

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

// kubeService is s as a cluster holds it, every port's appProtocol the protocol meshlab
// chose for it: istiod then chooses the same even for a port whose name says nothing, so
// the two generators are compared on one decision.
func kubeService(s *model.Service) *corev1.Service {
	svc := kubeobj.Service(s)
	for i, p := range s.Ports {
		ap := strings.ToLower(p.Protocol.String())
		svc.Spec.Ports[i].AppProtocol = &ap
	}
	return svc
}

func kubePod(p *model.Pod) *corev1.Pod { return kubeobj.Pod(p) }

func podLabels(p *model.Pod) map[string]string { return kubeobj.PodLabels(p) }

func endpointSlice(m *model.Model, s *model.Service) *discoveryv1.EndpointSlice {
	return kubeobj.EndpointSlice(m, s)
}

// oracleKinds are the Istio kinds the oracle gives istiod (the fidelity scenarios'
// kinds; gateways and telemetry are not held to istiod's).
var oracleKinds = []string{"VirtualService", "DestinationRule", "ServiceEntry", "PeerAuthentication", "AuthorizationPolicy", "Sidecar"}

// istioConfigs returns the model's Istio objects as istiod's ConfigString reads them.
func istioConfigs(m *model.Model) (string, error) {
	docs, err := istioDocs(m, oracleKinds...)
	if err != nil {
		return "", err
	}
	return joinYAML(docs)
}

// istioDocs returns the model's Istio objects of the given kinds (all the oracle's when
// none is given) as Kubernetes objects.
func istioDocs(m *model.Model, kinds ...string) ([]any, error) {
	if len(kinds) == 0 {
		kinds = oracleKinds
	}
	return kubeobj.IstioObjects(m, kinds...)
}

func joinYAML(docs []any) (string, error) {
	b, err := kubeobj.JoinYAML(docs)
	return string(b), err
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
