package lab

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
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
// workload; istioctl's "NAME.NAMESPACE" names a pod too. namespace, when not empty,
// restricts the search to it. Without it, a name found in one namespace is that pod; a
// name several namespaces hold is the one in default, as kubectl's current namespace,
// else an error that asks for -n. The errors list what the reference could have named.
func (r *Record) FindPod(ref, namespace string) (PodRecord, error) {
	kind, name, byPod, err := SplitPodRef(ref)
	if err != nil {
		return PodRecord{}, err
	}
	if n, ns, dotted := strings.Cut(name, "."); dotted && namespace == "" {
		name, namespace = n, ns
	}
	var valid []string
	var found []PodRecord
	pods := r.Pods
	if r.ztunnel != nil {
		pods = append(slices.Clone(pods), *r.ztunnel)
	}
	for _, p := range pods {
		if namespace != "" && p.Namespace != namespace {
			continue
		}
		key := p.Name
		if !byPod {
			key = p.Workload
		}
		if namespace == "" && p.Namespace != model.DefaultNamespace {
			valid = append(valid, key+" (-n "+p.Namespace+")")
		} else {
			valid = append(valid, key)
		}
		if key == name {
			found = append(found, p)
		}
	}
	what := "pod"
	if !byPod {
		what = kind
	}
	if len(found) == 0 {
		slices.Sort(valid)
		in := ""
		if namespace != "" {
			in = " in namespace " + namespace
		}
		return PodRecord{}, fmt.Errorf("unknown %s %q%s in lab %s (valid: %s)", what, name, in, r.Name, strings.Join(slices.Compact(valid), ", "))
	}
	var namespaces []string
	for _, p := range found {
		namespaces = append(namespaces, p.Namespace)
	}
	slices.Sort(namespaces)
	if namespaces = slices.Compact(namespaces); len(namespaces) > 1 {
		if !slices.Contains(namespaces, model.DefaultNamespace) {
			return PodRecord{}, fmt.Errorf("%s %q is in namespaces %s of lab %s: choose one with -n NAMESPACE", what, name, strings.Join(namespaces, ", "), r.Name)
		}
		found = slices.DeleteFunc(found, func(p PodRecord) bool { return p.Namespace != model.DefaultNamespace })
	}
	slices.SortFunc(found, func(a, b PodRecord) int { return strings.Compare(a.Name, b.Name) })
	p := found[0]
	p.Key = p.key()
	return p, nil
}

// SplitPodRef reads a pod reference as kubectl does: "NAME", "pod/NAME" (and po, pods)
// name a pod (byPod); "deploy/NAME" and the other workload kinds name a workload. kind is
// lower case; a kind that has no pods is an error.
func SplitPodRef(ref string) (kind, name string, byPod bool, err error) {
	kind, name, typed := strings.Cut(ref, "/")
	if !typed {
		kind, name = "pod", ref
	}
	kind = strings.ToLower(kind)
	byPod = kind == "pod" || kind == "pods" || kind == "po"
	if !byPod && !workloadKinds[kind] {
		return "", "", false, fmt.Errorf("%q: %s is not a kind that has pods (pod, deploy, rs, sts, ds, workload)", ref, kind)
	}
	return kind, name, byPod, nil
}
