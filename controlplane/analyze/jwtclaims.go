package analyze

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// CodeJwtClaimBasedRoutingWithoutRequestAuthN is Istio's IST0149.
const CodeJwtClaimBasedRoutingWithoutRequestAuthN = "IST0149"

// istioSystem is the namespace whose RequestAuthentications Istio's analyzer reads for
// every pod (constants.IstioSystemNamespace, whatever the mesh's root namespace).
const istioSystem = "istio-system"

// checkJWTClaimRoutes is Istio's JWTClaimRouteAnalyzer: a VirtualService routing on a
// JWT claim ("@request.auth.claims..." in a match's headers) through a Gateway needs a
// RequestAuthentication (of istio-system or the pod's namespace) selecting every pod the
// Gateway selects, or no claims are there to route on. One finding per such pod, on the
// VirtualService, in istioctl's words; a Gateway the objects do not hold is left to the
// reference checks.
func checkJWTClaimRoutes(r *registry, objs []*object) []Finding {
	var fs []Finding
	for _, o := range objs {
		key := claimRouteKey(o)
		if key == "" {
			continue
		}
		for _, g := range o.vs.GetGateways() {
			if g == model.MeshGateway {
				continue
			}
			ns, name, ok := strings.Cut(g, "/")
			if !ok {
				ns, name = o.ref.Namespace, g
			}
			gw := findGateway(objs, ns, name)
			if gw == nil {
				continue
			}
			for _, pod := range r.workloads {
				if !matchesSet(gw.gw.GetSelector(), pod.labels) || authenticated(objs, pod) {
					continue
				}
				fs = append(fs, o.finding(Error, CodeJwtClaimBasedRoutingWithoutRequestAuthN, "spec.gateways",
					fmt.Sprintf("The virtual service uses the JWT claim based routing (key: %s) but found no request authentication for the gateway (%s) pod (%s). "+
						"The request authentication must first be applied for the gateway pods to validate the JWT token and make the claims available for routing.",
						key, ns+"/"+name, pod.ref.Name)))
			}
		}
	}
	return fs
}

// claimRouteKey returns the first claim route key of a VirtualService's matches, as
// Istio's routeBasedOnJWTClaimKey (the keys of a match in order), or "".
func claimRouteKey(o *object) string {
	for _, hr := range o.vs.GetHttp() {
		for _, m := range hr.GetMatch() {
			keys := make([]string, 0, len(m.GetHeaders()))
			for k := range m.GetHeaders() {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if _, ok := model.RoutingClaims(k); ok {
					return k
				}
			}
		}
	}
	return ""
}

func findGateway(objs []*object, ns, name string) *object {
	for _, o := range objs {
		if o.gw != nil && o.ref.Namespace == ns && o.ref.Name == name {
			return o
		}
	}
	return nil
}

// authenticated reports whether a RequestAuthentication of istio-system or of pod's
// namespace selects pod (one without a selector selects every pod, as Istio's
// analyzer reads it).
func authenticated(objs []*object, pod *object) bool {
	for _, o := range objs {
		if o.ra == nil || (o.ref.Namespace != istioSystem && o.ref.Namespace != pod.ref.Namespace) {
			continue
		}
		if matchesSet(o.ra.GetSelector().GetMatchLabels(), pod.labels) {
			return true
		}
	}
	return false
}

// matchesSet is Kubernetes' labels.SelectorFromSet(selector).Matches(labels): an empty
// set matches everything.
func matchesSet(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
