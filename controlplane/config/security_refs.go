package config

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/proto"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// rootNamespace returns the mesh root namespace the objects' MeshConfig names (the first
// MeshConfig's, when several were written), defaulted.
func rootNamespace(objs []*Object) string {
	for _, o := range objs {
		if o.MeshConfig != nil {
			return model.MeshConfig{RootNamespace: o.MeshConfig.GetRootNamespace()}.Root()
		}
	}
	return model.DefaultRootNamespace
}

// checkMeshWidePeerAuthentication records every mesh-wide PeerAuthentication (no selector,
// in the root namespace) after the first by name: a mesh has at most one.
func checkMeshWidePeerAuthentication(objs []*Object, errs *ErrorList) {
	root := rootNamespace(objs)
	var mesh []*Object
	for _, o := range objs {
		if o.PeerAuthentication != nil && o.Origin.Namespace == root && !hasSelector(o.PeerAuthentication.GetSelector()) {
			mesh = append(mesh, o)
		}
	}
	slices.SortStableFunc(mesh, func(a, b *Object) int { return cmp.Compare(a.Origin.Name, b.Origin.Name) })
	for _, o := range mesh[min(1, len(mesh)):] {
		p := problems{origin: o.Origin, doc: o.Doc, item: o.Item, list: errs}
		p.addf("spec.selector", "a mesh has one mesh-wide PeerAuthentication (no selector, in the root namespace %s); %s is already one", root, mesh[0].Origin)
	}
}

// peerAuthenticationModel returns the model form of a PeerAuthentication object: a copy of
// its spec whose selector is nil when it has no matchLabels (Istio treats both alike).
func peerAuthenticationModel(o *Object) *model.IstioConfig[*security.PeerAuthentication] {
	pa := proto.Clone(o.PeerAuthentication).(*security.PeerAuthentication)
	if !hasSelector(pa.Selector) {
		pa.Selector = nil
	}
	return &model.IstioConfig[*security.PeerAuthentication]{Name: o.Origin.Name, Namespace: o.Origin.Namespace, Spec: pa, Origin: o.Origin}
}

// authorizationPolicyModel is peerAuthenticationModel for an AuthorizationPolicy.
func authorizationPolicyModel(o *Object) *model.IstioConfig[*security.AuthorizationPolicy] {
	ap := proto.Clone(o.AuthorizationPolicy).(*security.AuthorizationPolicy)
	if !hasSelector(ap.Selector) {
		ap.Selector = nil
	}
	return &model.IstioConfig[*security.AuthorizationPolicy]{Name: o.Origin.Name, Namespace: o.Origin.Namespace, Spec: ap, Origin: o.Origin,
		Annotations: objectAnnotations(o)}
}
