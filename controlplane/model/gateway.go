package model

import (
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// Gateway deployments meshlab makes as `istioctl install --set profile=demo` does: a pod
// running the proxy as a standalone gateway (node type router) and its Service, in the
// mesh root namespace.
const (
	IngressGatewayName = "istio-ingressgateway"
	EgressGatewayName  = "istio-egressgateway"
)

// GatewayLabels returns the labels of the pods of a gateway deployment of Istio's
// profiles ("istio-ingressgateway" or "istio-egressgateway"), which its Service and
// the Gateways of Istio's docs select.
func GatewayLabels(name string) map[string]string {
	return map[string]string{"app": name, "istio": strings.TrimPrefix(name, "istio-")}
}

// Secret is a Kubernetes Secret a Gateway server names as credentialName: a
// kubernetes.io/tls Secret (tls.crt, tls.key, and ca.crt for MUTUAL) or a generic one
// with cert, key and cacert, as Istio reads them. All three are PEM.
type Secret struct {
	Name, Namespace string
	Cert, Key       []byte
	// CACert verifies client certificates (MUTUAL); nil when the Secret has none.
	CACert []byte
	Origin Origin
}

// Secret returns the Secret ns/name, or nil.
func (m *Model) Secret(ns, name string) *Secret {
	for _, s := range m.Secrets {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

// GatewaysFor returns the Gateways whose selector matches a router pod's labels, in
// model order, as Istio binds Gateways to gateway workloads: the selector is matched
// against pods of every namespace, and an empty selector matches every gateway pod.
// A sidecar pod has none.
func (m *Model) GatewaysFor(p *Pod) []*IstioConfig[*networking.Gateway] {
	if p == nil || !p.Router {
		return nil
	}
	var out []*IstioConfig[*networking.Gateway]
	for _, g := range m.Istio.Gateways {
		if labelsSelect(g.Spec.GetSelector(), p.Labels) {
			out = append(out, g)
		}
	}
	return out
}

func labelsSelect(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// MeshGateway is the reserved gateway name of a VirtualService's gateways that stands for
// every sidecar of the mesh.
const MeshGateway = "mesh"

// AppliesToMesh reports whether a VirtualService configures sidecars: it names no
// gateways, or names "mesh" among them.
func AppliesToMesh(vs *networking.VirtualService) bool {
	return len(vs.GetGateways()) == 0 || slices.Contains(vs.GetGateways(), MeshGateway)
}

// BindsGateway reports whether a VirtualService of namespace vsNS names the Gateway
// gwNS/gwName in its gateways, as Istio resolves them: "<ns>/<name>", or a bare name
// meaning a Gateway of the VirtualService's own namespace.
func BindsGateway(vs *networking.VirtualService, vsNS, gwNS, gwName string) bool {
	for _, g := range vs.GetGateways() {
		ns, name, ok := strings.Cut(g, "/")
		if !ok {
			ns, name = vsNS, g
		}
		if ns == gwNS && name == gwName {
			return true
		}
	}
	return false
}

// HostCovers reports whether the (possibly wildcard) host pattern matches every name h
// does: "*" covers all, "*.example.com" covers "a.example.com" and "*.b.example.com".
func HostCovers(pattern, h string) bool {
	switch {
	case pattern == "*" || pattern == h:
		return true
	case strings.HasPrefix(pattern, "*."):
		suffix := pattern[1:] // ".example.com"
		return strings.HasSuffix(strings.TrimPrefix(h, "*"), suffix) && h != suffix[1:]
	}
	return false
}
