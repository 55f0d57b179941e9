package analyze

import (
	"fmt"
	"strings"

	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// Ambient mode's bad input (issue 26). Istio has an analyzer code for one of them, a
// namespace labelled for both sidecar injection and ambient (IST0123
// NamespaceMultipleInjectionLabels, its injection analyzer's rule); the others are
// meshlab's: Istio has no analyzer for a dataplane-mode value istio-cni ignores, nor for
// a pod both injected and labelled ambient (istio-cni skips it), and it reports an
// AuthorizationPolicy ztunnel enforces only in part in the policy's status (condition
// ZtunnelAccepted, reason UnsupportedValue, still True), which istioctl analyze reads only
// when False (IST0171).

// Istio's injection labels, as the injector and istio-cni read them.
const (
	injectionLabel = "istio-injection"
	revisionLabel  = "istio.io/rev"
	injectLabel    = "sidecar.istio.io/inject"
)

// injectChoice is a pod template's own sidecar.istio.io/inject choice (label, else
// annotation), nil when it makes none.
func injectChoice(labels, annotations map[string]string) *bool {
	v, ok := labels[injectLabel]
	if !ok {
		v, ok = annotations[injectLabel]
	}
	if !ok {
		return nil
	}
	b := strings.EqualFold(v, "true") || v == "y" || v == "yes" || v == "on"
	return &b
}

// checkAmbient reports the ambient findings of objs.
func checkAmbient(objs []*object) []Finding {
	var fs []Finding
	namespaces := map[string]*object{}
	for _, o := range objs {
		if !o.namespace {
			continue
		}
		namespaces[o.ref.Name] = o
		fs = append(fs, checkDataplaneLabel(o, "metadata.labels", o.nsLabels)...)
		fs = append(fs, checkInjectionLabels(o)...)
	}
	var ambient []*object
	for _, o := range objs {
		if !o.workload {
			continue
		}
		field := "spec.template.metadata.labels"
		switch o.ref.Kind {
		case "Workload":
			field = "spec.labels"
		case "Pod":
			field = "metadata.labels"
		}
		fs = append(fs, checkDataplaneLabel(o, field, o.labels)...)
		injected := podInjected(o, namespaces)
		if injected && o.labels[model.LabelDataplaneMode] == model.DataplaneModeAmbient {
			why := "its sidecar.istio.io/inject asks for one"
			switch {
			case o.ref.Kind == "Workload":
				why = "a Workload's pods get one unless spec.sidecar.inject is false"
			case injectChoice(o.labels, o.annotations) != nil:
			case namespaces[o.ref.Namespace] == nil:
				why = fmt.Sprintf("namespace %s is not declared, which meshlab takes as labelled istio-injection=enabled", o.ref.Namespace)
			default:
				why = fmt.Sprintf("namespace %s is labelled for injection", o.ref.Namespace)
			}
			fs = append(fs, o.finding(Warning, CodeInjectedAndAmbient, field+"["+model.LabelDataplaneMode+"]",
				fmt.Sprintf("The pods are labelled %s=ambient but get a sidecar (%s): istio-cni never captures a pod with a sidecar, so they run with their sidecar, not in ambient mode. Set %s: \"false\" on the pods to run them in ambient mode.",
					model.LabelDataplaneMode, why, injectLabel)))
		}
		if !injected && podAmbient(o, namespaces) {
			ambient = append(ambient, o)
		}
	}
	for _, o := range objs {
		if o.ap != nil {
			fs = append(fs, checkZtunnelPolicy(o, ambient)...)
		}
	}
	return fs
}

// checkDataplaneLabel reports an istio.io/dataplane-mode value other than ambient and
// none, which istio-cni's enablement selectors ignore.
func checkDataplaneLabel(o *object, field string, labels map[string]string) []Finding {
	v, ok := labels[model.LabelDataplaneMode]
	if !ok || v == model.DataplaneModeAmbient || v == model.DataplaneModeNone {
		return nil
	}
	effect := "the namespace's pods are not in ambient mode"
	if !o.namespace {
		effect = "the pods follow their namespace's mode as if the label were absent"
	}
	return []Finding{o.finding(Error, CodeDataplaneModeInvalid, field+"["+model.LabelDataplaneMode+"]",
		fmt.Sprintf("%s=%q is neither %q nor %q: istio-cni ignores it, so %s.", model.LabelDataplaneMode, v, model.DataplaneModeAmbient, model.DataplaneModeNone, effect))}
}

// checkInjectionLabels is Istio's IST0123 rule: a namespace with istio-injection, and
// istio.io/rev or istio.io/dataplane-mode unless istio-injection is disabled.
func checkInjectionLabels(o *object) []Finding {
	var found []string
	v, hasInjection := o.nsLabels[injectionLabel]
	if hasInjection {
		found = append(found, injectionLabel+"="+v)
	}
	for _, l := range []string{revisionLabel, model.LabelDataplaneMode} {
		if lv, ok := o.nsLabels[l]; ok && (!hasInjection || v == "enabled") {
			found = append(found, l+"="+lv)
		}
	}
	if len(found) < 2 {
		return nil
	}
	return []Finding{o.finding(Warning, CodeNamespaceMultipleInjectionLabels, "metadata.labels",
		fmt.Sprintf("The namespace has more than one type of injection labels [%s], which may lead to undefined behavior. Make sure only one injection label exists.", strings.Join(found, " ")))}
}

// podInjected reports whether a workload's pods get a sidecar, as the loader decides:
// their own choice, else a declared namespace's istio-injection or istio.io/rev label,
// else (an undeclared namespace) yes.
func podInjected(o *object, namespaces map[string]*object) bool {
	if o.inject != nil {
		return *o.inject
	}
	ns := namespaces[o.ref.Namespace]
	if ns == nil {
		return true
	}
	switch ns.nsLabels[injectionLabel] {
	case "enabled":
		return true
	case "disabled":
		return false
	}
	_, rev := ns.nsLabels[revisionLabel]
	return rev
}

// podAmbient reports whether a workload's pods without a sidecar are in ambient mode
// (model.DataplaneMode's rule).
func podAmbient(o *object, namespaces map[string]*object) bool {
	switch o.labels[model.LabelDataplaneMode] {
	case model.DataplaneModeAmbient:
		return true
	case model.DataplaneModeNone:
		return false
	}
	ns := namespaces[o.ref.Namespace]
	return ns != nil && ns.nsLabels[model.LabelDataplaneMode] == model.DataplaneModeAmbient
}

// checkZtunnelPolicy reports an AuthorizationPolicy that applies to ambient pods and that
// ztunnel cannot enforce as written, with the status istiod writes on it: a dry-run
// policy (istio.io/dry-run: istiod does not send it to ztunnel by default), HTTP attributes
// (an ALLOW rule using them is dropped, so it allows nothing: the pods fail closed; a
// DENY rule loses them, denying more), or an action ztunnel does not have (CUSTOM,
// AUDIT: not enforced at all). A policy with targetRefs is a waypoint's, not ztunnel's.
func checkZtunnelPolicy(o *object, ambient []*object) []Finding {
	ap := o.ap
	if len(ap.GetTargetRefs()) > 0 || ap.GetTargetRef() != nil {
		return nil
	}
	var pods []string
	for _, w := range ambient {
		if policyApplies(o, w) {
			pods = append(pods, w.ref.Kind+" "+w.ref.Namespace+"/"+w.ref.Name)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	on := fmt.Sprintf(" It applies to ambient pods (%s).", strings.Join(pods, ", "))
	if (&model.IstioConfig[*security.AuthorizationPolicy]{Annotations: o.annotations}).DryRun() {
		// istiod sends ztunnel no dry-run policy unless AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY
		// is on (it is not by default, nor in a lab): the pods get neither its rules nor its log.
		return []Finding{o.finding(Warning, CodeNegativeConditionStatus, "metadata.annotations",
			fmt.Sprintf(`A condition with a negative status is present: type=ZtunnelAccepted, reason=UnsupportedValue, message=found policy "%s/%s" using dry-run annotation, but support for ambient dry-run authorizationPolicies isn't enabled.%s`, o.ref.Namespace, o.ref.Name, on))}
	}
	switch ap.GetAction() {
	case security.AuthorizationPolicy_ALLOW, security.AuthorizationPolicy_DENY:
	default:
		return []Finding{o.finding(Warning, CodeNegativeConditionStatus, "spec.action",
			fmt.Sprintf("A condition with a negative status is present: type=ZtunnelAccepted, reason=UnsupportedValue, message=ztunnel does not support the %s action.%s", ap.GetAction(), on))}
	}
	_, l7 := xds.ConvertAuthorizationPolicy(model.DefaultRootNamespace, &model.IstioConfig[*security.AuthorizationPolicy]{Name: o.ref.Name, Namespace: o.ref.Namespace, Spec: ap})
	if len(l7) == 0 {
		return nil
	}
	effect := "Within an ALLOW policy, rules matching HTTP attributes are omitted. This will be more restrictive than requested."
	if ap.GetAction() == security.AuthorizationPolicy_DENY {
		effect = "DENY policy with HTTP attributes is enforced without the HTTP rules. This will be more restrictive than requested."
	}
	return []Finding{o.finding(Warning, CodeZtunnelPartialPolicy, "spec.rules",
		fmt.Sprintf("ztunnel does not support HTTP attributes (found: %s). In ambient mode you must use a waypoint proxy to enforce HTTP rules. %s%s", strings.Join(l7, ", "), effect, on))}
}

// policyApplies reports whether policy p (no targetRefs) applies to workload w: a
// selector picks pods of its namespace (of any namespace in the root namespace, as
// istiod's ambient index), no selector every pod of its namespace, or of the mesh in the
// root namespace.
func policyApplies(p, w *object) bool {
	root := model.DefaultRootNamespace
	if sel := p.ap.GetSelector().GetMatchLabels(); len(sel) > 0 {
		return (p.ref.Namespace == w.ref.Namespace || p.ref.Namespace == root) && selects(sel, w.labels)
	}
	return p.ref.Namespace == w.ref.Namespace || p.ref.Namespace == root
}
