package api

import (
	"slices"
	"strings"
)

// GatewayAPIGatewayKind is the Kind under which the lab records and answers a Gateway
// API Gateway: kubectl's resource.group form, so that it never collides with Istio's
// Gateway.
const GatewayAPIGatewayKind = "Gateway.gateway.networking.k8s.io"

// Kind is one kind of object the lab holds, as kubectl's discovery describes a resource
// (GET /v1/kinds). The CLI resolves what a user typed ("vs", "virtualservices") against
// the lab's list, as kubectl resolves resource names against an API server's discovery,
// instead of keeping a kind table of its own.
type Kind struct {
	Kind  string `json:"kind"`            // as the lab records it: "VirtualService", GatewayAPIGatewayKind
	Group string `json:"group,omitempty"` // the API group: "networking.istio.io"; "" for Kubernetes' core group
	// Names are every spelling that names the kind, lower case: "virtualservice",
	// "virtualservices", "vs".
	Names []string `json:"names"`
	// Note says why the lab keeps objects of this kind without acting on them ("" for a
	// kind it acts on); describe prints it.
	Note string `json:"note,omitempty"`
}

// Kinds is the lab's list of kinds, sorted by Kind.
type Kinds []Kind

// Lookup returns the kind that s names: a kind as the lab records it ("Gateway" is
// Istio's), else one of its spellings in any case ("vs", "virtualservice", "gateway",
// which is the Gateway API's as kubectl resolves it), reporting whether one does.
func (ks Kinds) Lookup(s string) (Kind, bool) {
	for _, k := range ks {
		if k.Kind == s {
			return k, true
		}
	}
	s = strings.ToLower(s)
	for _, k := range ks {
		if slices.Contains(k.Names, s) {
			return k, true
		}
	}
	// kubectl's RESOURCE.GROUP and RESOURCE.VERSION.GROUP: a spelling of the kind of
	// that group ("authorizationpolicy.security.istio.io", "deployments.v1.apps").
	resource, group, ok := strings.Cut(s, ".")
	if !ok {
		return Kind{}, false
	}
	groups := []string{group}
	if version, rest, ok := strings.Cut(group, "."); ok && strings.HasPrefix(version, "v") && strings.ContainsAny(version, "0123456789") {
		groups = append(groups, rest)
	}
	for _, k := range ks {
		if slices.Contains(groups, k.Group) && (slices.Contains(k.Names, resource) || strings.ToLower(k.Kind) == resource) {
			return k, true
		}
	}
	return Kind{}, false
}

// KindNames returns the kinds' names, as Kinds holds them.
func (ks Kinds) KindNames() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Kind
	}
	return out
}

// Resource is kubectl's name of the kind in its messages: "deployment.apps",
// "gateway.gateway.networking.k8s.io", "service"; plural without the group
// ("deployments", "gateways", "authorizationpolicies").
func (k Kind) Resource(plural bool) string {
	name, _, _ := strings.Cut(strings.ToLower(k.Kind), ".")
	if plural {
		switch {
		case strings.HasSuffix(name, "y") && len(name) > 1 && !strings.ContainsAny(name[len(name)-2:len(name)-1], "aeiou"):
			return strings.TrimSuffix(name, "y") + "ies"
		case strings.HasSuffix(name, "s"):
			return name + "es"
		}
		return name + "s"
	}
	if k.Group != "" {
		return name + "." + k.Group
	}
	return name
}
