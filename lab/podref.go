package lab

import (
	"fmt"
	"slices"
	"strings"
)

// workloadKinds are the kinds a pod reference may name its workload by, as kubectl's
// `exec deploy/NAME` does (singular, plural, short and TYPE.GROUP forms).
var workloadKinds = map[string]bool{
	"deploy": true, "deployment": true, "deployments": true, "deployment.apps": true, "deployments.apps": true,
	"rs": true, "replicaset": true, "replicasets": true, "replicaset.apps": true, "replicasets.apps": true,
	"sts": true, "statefulset": true, "statefulsets": true, "statefulset.apps": true, "statefulsets.apps": true,
	"ds": true, "daemonset": true, "daemonsets": true, "daemonset.apps": true, "daemonsets.apps": true,
	"workload": true, "workloads": true,
}

// FindPod returns the pod a reference names, as kubectl reads one: "NAME" or "pod/NAME"
// names a pod, "deploy/NAME" (or another workload kind) the first pod, by name, of that
// workload. namespace, when not empty, restricts the search to it. The error lists what
// the reference could have named.
func (r *Record) FindPod(ref, namespace string) (PodRecord, error) {
	kind, name, typed := strings.Cut(ref, "/")
	if !typed {
		kind, name = "pod", ref
	}
	kind = strings.ToLower(kind)
	byPod := kind == "pod" || kind == "pods" || kind == "po"
	if !byPod && !workloadKinds[kind] {
		return PodRecord{}, fmt.Errorf("%q: %s is not a kind that has pods (pod, deploy, rs, sts, ds, workload)", ref, kind)
	}
	var valid []string
	var found []PodRecord
	for _, p := range r.Pods {
		if namespace != "" && p.Namespace != namespace {
			continue
		}
		key := p.Name
		if !byPod {
			key = p.Workload
		}
		valid = append(valid, key)
		if key == name {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		what := "pod"
		if !byPod {
			what = kind
		}
		slices.Sort(valid)
		return PodRecord{}, fmt.Errorf("unknown %s %q in lab %s (valid: %s)", what, name, r.Name, strings.Join(slices.Compact(valid), ", "))
	}
	slices.SortFunc(found, func(a, b PodRecord) int { return strings.Compare(a.Name, b.Name) })
	return found[0], nil
}
