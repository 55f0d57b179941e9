package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// checkScenario records the problems that involve several objects: duplicate objects,
// duplicate pod names and, when a scenario is loaded (selectors), Service selectors that
// match no Workload, a likely typo in a lab file. A running lab takes such a Service, as
// Kubernetes does: its pods may be applied later, or deleted (`kubectl delete deployment`
// leaves its Service without endpoints). valid holds the objects that passed their own
// checks, invalid those whose header was read but which have problems of their own (they
// still count as duplicates, and their selectors and labels are still checked when they
// decoded).
func checkScenario(valid, invalid []*Object, selectors bool, errs *ErrorList) {
	all := append(append([]*Object(nil), valid...), invalid...)
	slices.SortFunc(all, func(a, b *Object) int { return cmp.Compare(a.Doc, b.Doc) })
	type key struct{ kind, ns, name string }
	firstObj := map[key]*Object{}
	firstPod := map[string]*Object{} // by pod key: names repeat across namespaces

	for _, o := range all {
		p := problems{origin: o.Origin, doc: o.Doc, item: o.Item, list: errs}
		k := key{o.Origin.Kind, o.Origin.Namespace, o.Origin.Name}
		if prev, dup := firstObj[k]; dup {
			p.addf("metadata.name", "duplicate of the %s in document %d", o.Origin.Kind, prev.Doc)
			continue
		}
		firstObj[k] = o
		// Pod names are unique within a namespace, as Kubernetes'.
		for _, pod := range o.pods {
			if prev, dup := firstPod[pod.Key()]; dup {
				p.addf("metadata.name", "pod %q is also made by %s %s/%s in document %d",
					pod.Name, prev.Origin.Kind, prev.Origin.Namespace, prev.Origin.Name, prev.Doc)
				break
			}
			firstPod[pod.Key()] = o
		}
	}
	for _, o := range invalid {
		if o.Origin.Kind == "Workload" && o.Workload == nil || kubeWorkloadKinds[o.Origin.Kind] != "" && o.kube == nil {
			return // its labels are unknown: a selector check would mislead
		}
	}
	if len(invalid) == 0 {
		// References are only checked between valid objects: a broken Service or
		// DestinationRule would make every VirtualService naming it look wrong too.
		checkIstioRefs(all, errs)
		checkGatewayAPIRefs(all, errs)
	}
	for _, o := range all {
		if !selectors || o.Service == nil || len(o.Service.Spec.Selector) == 0 {
			continue // not decoded, or already refused for its empty selector
		}
		sel := o.Service.Spec.Selector
		if !selectsAny(o.Origin.Namespace, sel, all) {
			p := problems{origin: o.Origin, doc: o.Doc, item: o.Item, list: errs}
			p.addf("spec.selector", "matches no Workload (no Workload in namespace %s has the labels %s)",
				o.Origin.Namespace, formatLabels(sel))
		}
	}
}

// selectsAny reports whether selector matches the labels of a Workload or of a Kubernetes
// workload's pod template in namespace ns (even one scaled to zero replicas), as
// model.Service.Selects would.
func selectsAny(ns string, selector map[string]string, objs []*Object) bool {
	svc := model.Service{Selector: selector}
	for _, o := range objs {
		if o.Origin.Namespace != ns {
			continue
		}
		if o.Workload != nil && svc.Selects(o.Workload.Spec.Labels) {
			return true
		}
		if o.kube != nil && svc.Selects(o.kube.template.Labels) {
			return true
		}
	}
	return false
}

// formatLabels renders labels as "k=v,k2=v2", sorted.
func formatLabels(labels map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, labels[k])
	}
	return b.String()
}
