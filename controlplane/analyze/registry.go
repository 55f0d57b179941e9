package analyze

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// registry indexes what objects may name: Services and ServiceEntry hosts by FQDN, the
// subsets DestinationRules define per FQDN, and Workloads.
type registry struct {
	services  map[string]*object
	entries   map[string]*object
	subsets   map[string]map[string]bool
	workloads []*object
}

func newRegistry(objs []*object) *registry {
	r := &registry{services: map[string]*object{}, entries: map[string]*object{}, subsets: map[string]map[string]bool{}}
	for _, o := range objs {
		switch {
		case o.svc != nil:
			r.services[o.ref.Name+"."+o.ref.Namespace+".svc."+model.DefaultClusterDomain] = o
		case o.se != nil:
			for _, h := range o.se.GetHosts() {
				r.entries[model.HostCandidates(h, o.ref.Namespace)[0]] = o
			}
		case o.workload:
			r.workloads = append(r.workloads, o)
		}
	}
	for _, o := range objs {
		if o.dr == nil {
			continue
		}
		fqdn, ok := r.lookup(o.dr.GetHost(), o.ref.Namespace)
		if !ok {
			continue
		}
		if r.subsets[fqdn] == nil {
			r.subsets[fqdn] = map[string]bool{}
		}
		for _, s := range o.dr.GetSubsets() {
			r.subsets[fqdn][s.GetName()] = true
		}
	}
	return r
}

// lookup resolves host, written in namespace ns, to a Service or ServiceEntry FQDN.
func (r *registry) lookup(host, ns string) (string, bool) {
	for _, c := range model.HostCandidates(host, ns) {
		if r.services[c] != nil || r.entries[c] != nil {
			return c, true
		}
	}
	return "", false
}

// selects reports whether selector matches labels (an empty selector matches nothing).
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// podsOf returns the Workloads of ns whose labels selector matches.
func (r *registry) podsOf(ns string, selector map[string]string) []*object {
	var out []*object
	for _, w := range r.workloads {
		if w.ref.Namespace == ns && selects(selector, w.labels) {
			out = append(out, w)
		}
	}
	return out
}

// serviceSelector returns a Service's selector.
func serviceSelector(s *corev1.Service) map[string]string { return s.Spec.Selector }
