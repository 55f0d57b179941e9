package runner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab"
)

// isSelector reports whether a pod reference is a label selector ("app=ratings",
// "app in (a,b)", "!canary") rather than a name: no name has these characters.
func isSelector(ref string) bool { return strings.ContainsAny(ref, "=!( ") }

// findPod returns the pod a lab's reference names, as kubectl reads one: a pod's name
// (or istioctl's NAME.NAMESPACE), a workload "deploy/NAME" (its first pod by name, the
// one `kubectl exec deploy/NAME` picks), or a label selector (its first pod by name, as
// the docs' `kubectl get pod -l app=ratings -o jsonpath='{.items[0].metadata.name}'`).
// A Deployment's pods are named <deployment>-<hash>-<suffix>, so a lab on Istio's
// samples names them by their Deployment or labels. Workloads and selectors look in
// namespace default first, then the others in order.
func findPod(m *model.Model, ref string) (*model.Pod, error) {
	var match func(*model.Pod) bool
	var what string
	if isSelector(ref) {
		sel, err := labels.Parse(ref)
		if err != nil {
			return nil, fmt.Errorf("label selector %q: %w", ref, err)
		}
		match = func(p *model.Pod) bool { return sel.Matches(labels.Set(p.Labels)) }
		what = "no pod has labels " + ref
	} else {
		kind, name, byPod, err := lab.SplitPodRef(ref)
		if err != nil {
			return nil, err
		}
		if byPod {
			p, err := m.LookupPod(name)
			if err == nil && p == nil {
				err = fmt.Errorf("the lab has no pod %q (it has %s)", name, podList(m))
			}
			return p, err
		}
		match = func(p *model.Pod) bool { return p.Workload == name }
		what = fmt.Sprintf("the lab has no %s %q (its pods: %s)", kind, name, podList(m))
	}
	var found []*model.Pod
	for _, p := range m.Pods {
		if match(p) {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%s", what)
	}
	def := func(p *model.Pod) int {
		if p.Namespace == model.DefaultNamespace {
			return 0
		}
		return 1
	}
	return slices.MinFunc(found, func(a, b *model.Pod) int {
		return cmp.Or(def(a)-def(b), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	}), nil
}

// podList names the model's pods, for errors.
func podList(m *model.Model) string {
	names := make([]string, len(m.Pods))
	for i, p := range m.Pods {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// podName is the reference the run uses for p: its name, or NAME.NAMESPACE when the
// name alone would name another pod (or none).
func podName(m *model.Model, p *model.Pod) string {
	if q, _ := m.LookupPod(p.Name); q == p {
		return p.Name
	}
	return p.Name + "." + p.Namespace
}

// shellPod is how a command the attendee runs names the pod ref names: as written, or,
// for a label selector, as Istio's docs find it.
func shellPod(ref string) string {
	if !isSelector(ref) {
		return ref
	}
	return `"$(meshlab get pod -l ` + shellQuote(ref) + ` -o jsonpath='{.items[0].metadata.name}')"`
}
