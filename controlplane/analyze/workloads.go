package analyze

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// checkWorkloads reports Services that select no Workload and Workloads no Service
// selects.
func checkWorkloads(r *registry, objs []*object) []Finding {
	var fs []Finding
	for _, o := range objs {
		if o.svc == nil {
			continue
		}
		sel := serviceSelector(o.svc)
		if len(sel) == 0 {
			fs = append(fs, o.finding(Error, CodeServiceSelectsNoPods, "spec.selector",
				"The Service has no selector, so it has no pods (meshlab has no manual endpoints)."))
			continue
		}
		if len(r.podsOf(o.ref.Namespace, sel)) == 0 {
			fs = append(fs, o.finding(Error, CodeServiceSelectsNoPods, "spec.selector",
				fmt.Sprintf("The Service selects no pods: no Workload in namespace %s has the labels %s.", o.ref.Namespace, formatLabels(sel))))
		}
	}
	for _, w := range r.workloads {
		inService := false
		for _, o := range objs {
			if o.svc != nil && o.ref.Namespace == w.ref.Namespace && selects(serviceSelector(o.svc), w.labels) {
				inService = true
				break
			}
		}
		if !inService {
			fs = append(fs, w.finding(Info, CodeWorkloadInNoService, "spec.labels",
				fmt.Sprintf("No Service selects this Workload (labels %s): other pods can reach it only by IP.", formatLabels(w.labels))))
		}
	}
	return fs
}

// formatLabels renders labels as "a=b,c=d" in key order.
func formatLabels(l map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		kv = append(kv, k+"="+l[k])
	}
	if len(kv) == 0 {
		return "(none)"
	}
	return strings.Join(kv, ",")
}
