package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// describeKube is kubectl describe KIND NAME (or KIND/NAME) for the kinds a lab stores
// as written, printed as kubectl's describers print them; the lab's note on the kind
// (stored, no effect) goes to stderr, so the output is kubectl's.
func describeKube(cmd *cobra.Command, g *globalFlags, namespace string, args []string) error {
	kind, name, slash := strings.Cut(args[0], "/")
	switch {
	case slash && len(args) == 1 && name != "":
	case !slash && len(args) == 2:
		name = args[1]
	default:
		return errors.New("describe KIND NAME or KIND/NAME (pod, service, Istio's and the Gateway API's kinds, clusterrole, clusterrolebinding, role, rolebinding, pdb, hpa)")
	}
	c, kinds, err := g.kindsClient(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	if isIstioOperatorKind(kind) {
		iop, err := readInstalledState(cmd.Context(), c)
		if err != nil {
			return err
		}
		if iop == nil || name != installedStateName || (namespace != "" && namespace != installedStateNamespace) {
			return installedStateNotFound(name)
		}
		return describeCustom(cmd.OutOrStdout(), iop)
	}
	k, ok := kinds.Lookup(kind)
	if !ok {
		return fmt.Errorf("the server doesn't have a resource type %q", kind)
	}
	if namespace == "" || clusterScoped(k) {
		namespace = map[bool]string{true: "", false: "default"}[clusterScoped(k)]
	}
	render := kubeDescribers[k.Kind]
	if render == nil && isCustomKind(k) {
		return describeCustomObject(cmd, c, k, namespace, name)
	}
	if render == nil {
		return fmt.Errorf("describe %s: meshlab describes pods, services, Istio's and the Gateway API's kinds and the kinds it stores as written (%s); see `meshlab get %s %s -o yaml`",
			kind, strings.Join(slices.Sorted(maps.Keys(kubeDescribers)), ", "), kind, name)
	}
	objs, err := c.Objects(cmd.Context(), k.Kind, namespace, name)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return notFound(k, name)
	}
	if err := render(cmd.OutOrStdout(), objs[0].Object); err != nil {
		return fmt.Errorf("describe %s %s: %w", kind, name, err)
	}
	if k.Note != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "Note (meshlab): %s/%s is %s\n", k.Resource(false), name, k.Note)
	}
	return nil
}

// kubeDescribers render a stored object as kubectl describe does its kind.
var kubeDescribers = map[string]func(io.Writer, json.RawMessage) error{
	"ClusterRole": func(w io.Writer, raw json.RawMessage) error {
		var r rbacv1.ClusterRole
		return describeDecoded(w, raw, &r, func(d *describeWriter) { d.role(r.ObjectMeta, r.Rules) })
	},
	"Role": func(w io.Writer, raw json.RawMessage) error {
		var r rbacv1.Role
		return describeDecoded(w, raw, &r, func(d *describeWriter) { d.role(r.ObjectMeta, r.Rules) })
	},
	"ClusterRoleBinding": func(w io.Writer, raw json.RawMessage) error {
		var b rbacv1.ClusterRoleBinding
		return describeDecoded(w, raw, &b, func(d *describeWriter) { d.binding(b.ObjectMeta, b.RoleRef, b.Subjects) })
	},
	"RoleBinding": func(w io.Writer, raw json.RawMessage) error {
		var b rbacv1.RoleBinding
		return describeDecoded(w, raw, &b, func(d *describeWriter) { d.binding(b.ObjectMeta, b.RoleRef, b.Subjects) })
	},
	"PodDisruptionBudget": func(w io.Writer, raw json.RawMessage) error {
		var p policyv1.PodDisruptionBudget
		return describeDecoded(w, raw, &p, func(d *describeWriter) { d.pdb(&p) })
	},
	"HorizontalPodAutoscaler": func(w io.Writer, raw json.RawMessage) error {
		var h autoscalingv2.HorizontalPodAutoscaler
		return describeDecoded(w, raw, &h, func(d *describeWriter) { d.hpa(&h) })
	},
}

func describeDecoded(w io.Writer, raw json.RawMessage, into any, render func(*describeWriter)) error {
	if err := json.Unmarshal(raw, into); err != nil {
		return err
	}
	d := &describeWriter{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	render(d)
	return d.tw.Flush()
}

// describeWriter writes kubectl describe's aligned "Field:\tvalue" lines, each level
// indented two spaces.
type describeWriter struct{ tw *tabwriter.Writer }

func (d *describeWriter) line(level int, format string, a ...any) {
	fmt.Fprintf(d.tw, strings.Repeat("  ", level)+format+"\n", a...)
}

// pairs writes Labels or Annotations as kubectl does: <none>, or one per line, sorted.
func (d *describeWriter) pairs(title, sep string, m map[string]string) {
	if _, ok := m[lastAppliedAnnotation]; ok && title == "Annotations" {
		// kubectl describe leaves kubectl apply's record out.
		m = maps.Clone(m)
		delete(m, lastAppliedAnnotation)
	}
	if len(m) == 0 {
		d.line(0, "%s:\t<none>", title)
		return
	}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i == 0 {
			d.line(0, "%s:\t%s%s%s", title, k, sep, m[k])
		} else {
			d.line(0, "\t%s%s%s", k, sep, m[k])
		}
	}
}

// lastAppliedAnnotation is kubectl apply's record of what it applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

func (d *describeWriter) meta(m metav1.ObjectMeta, namespaced bool) {
	d.line(0, "Name:\t%s", m.Name)
	if namespaced {
		d.line(0, "Namespace:\t%s", m.Namespace)
	}
	d.pairs("Labels", "=", m.Labels)
	d.pairs("Annotations", ": ", m.Annotations)
}

// role is kubectl's Role and ClusterRole describer: the rules broken down to one group
// and resource (and name) each, those differing only in verbs merged, sorted as the
// API's own rule strings sort.
func (d *describeWriter) role(m metav1.ObjectMeta, rules []rbacv1.PolicyRule) {
	d.line(0, "Name:\t%s", m.Name)
	d.pairs("Labels", "=", m.Labels)
	d.pairs("Annotations", ": ", m.Annotations)
	d.line(0, "PolicyRule:")
	d.line(1, "Resources\tNon-Resource URLs\tResource Names\tVerbs")
	d.line(1, "---------\t-----------------\t--------------\t-----")
	for _, r := range describedRules(rules) {
		res := ""
		if len(r.Resources) > 0 {
			base, sub, hasSub := strings.Cut(r.Resources[0], "/")
			res = base
			if len(r.APIGroups) > 0 && r.APIGroups[0] != "" {
				res += "." + r.APIGroups[0]
			}
			if hasSub {
				res += "/" + sub
			}
		}
		d.line(1, "%s\t%v\t%v\t%v", res, r.NonResourceURLs, r.ResourceNames, r.Verbs)
	}
}

// describedRules breaks rules down and merges them as kubectl describe lists them.
func describedRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name string }
	var out []rbacv1.PolicyRule
	merged := map[key]int{} // index in out
	add := func(k key, r rbacv1.PolicyRule) {
		if i, ok := merged[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			return
		}
		merged[k] = len(out)
		out = append(out, r)
	}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if len(r.ResourceNames) == 0 {
					add(key{g, res, ""}, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: slices.Clone(r.Verbs)})
				}
				for _, n := range r.ResourceNames {
					add(key{g, res, n}, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, ResourceNames: []string{n}, Verbs: slices.Clone(r.Verbs)})
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: slices.Clone(r.Verbs)})
		}
	}
	slices.SortStableFunc(out, func(a, b rbacv1.PolicyRule) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// binding is kubectl's RoleBinding and ClusterRoleBinding describer.
func (d *describeWriter) binding(m metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
	d.line(0, "Name:\t%s", m.Name)
	d.pairs("Labels", "=", m.Labels)
	d.pairs("Annotations", ": ", m.Annotations)
	d.line(0, "Role:")
	d.line(1, "Kind:\t%s", ref.Kind)
	d.line(1, "Name:\t%s", ref.Name)
	d.line(0, "Subjects:")
	d.line(1, "Kind\tName\tNamespace")
	d.line(1, "----\t----\t---------")
	for _, s := range subjects {
		d.line(1, "%s\t%s\t%s", s.Kind, s.Name, s.Namespace)
	}
}

// pdb is kubectl's PodDisruptionBudget describer; the status is what a lab's (absent)
// disruption controller wrote: nothing.
func (d *describeWriter) pdb(p *policyv1.PodDisruptionBudget) {
	d.line(0, "Name:\t%s", p.Name)
	d.line(0, "Namespace:\t%s", p.Namespace)
	switch {
	case p.Spec.MinAvailable != nil:
		d.line(0, "Min available:\t%s", p.Spec.MinAvailable.String())
	case p.Spec.MaxUnavailable != nil:
		d.line(0, "Max unavailable:\t%s", p.Spec.MaxUnavailable.String())
	}
	if p.Spec.Selector != nil {
		d.line(0, "Selector:\t%s", metav1.FormatLabelSelector(p.Spec.Selector))
	} else {
		d.line(0, "Selector:\t<unset>")
	}
	d.line(0, "Status:")
	d.line(2, "Allowed disruptions:\t%d", p.Status.DisruptionsAllowed)
	d.line(2, "Current:\t%d", p.Status.CurrentHealthy)
	d.line(2, "Desired:\t%d", p.Status.DesiredHealthy)
	d.line(2, "Total:\t%d", p.Status.ExpectedPods)
	d.line(0, "Events:\t<none>")
}

// hpa is the head of kubectl's HorizontalPodAutoscaler describer (its metrics, which a
// lab does not measure, left out).
func (d *describeWriter) hpa(h *autoscalingv2.HorizontalPodAutoscaler) {
	d.meta(h.ObjectMeta, true)
	d.line(0, "CreationTimestamp:\t%s", h.CreationTimestamp.Format(time.RFC1123Z))
	d.line(0, "Reference:\t%s/%s", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
	minReplicas := "<unset>"
	if h.Spec.MinReplicas != nil {
		minReplicas = fmt.Sprint(*h.Spec.MinReplicas)
	}
	d.line(0, "Min replicas:\t%s", minReplicas)
	d.line(0, "Max replicas:\t%d", h.Spec.MaxReplicas)
	d.line(0, "Events:\t<none>")
}
