package main

import (
	"fmt"
	"io"

	"github.com/meshlab/meshlab/api"
)

// printChanges writes what an apply or delete changed as text (one line a change, as
// kubectl words it, on out), JSON or YAML (the API's typed changes). kinds is the lab's
// list (for each kind's API group, as kubectl names resources). In the text form, what
// kubectl does not print goes to errOut, so out is kubectl's own: the pods an apply or
// delete made or removed (the Deployment controller makes them later, unseen by kubectl
// apply), and why the lab keeps no copy of a Kubernetes kind that changes nothing in it
// (a ClusterRole), as kubectl prints a server's warnings.
func printChanges(out, errOut io.Writer, format string, changes []api.Change, kinds api.Kinds) error {
	if changes == nil {
		changes = []api.Change{} // -o json prints [], not null
	}
	return printOutput(out, format, changes, func(out io.Writer) error {
		for _, c := range changes {
			w := out
			if c.Kind == api.PodKind {
				w = errOut
			}
			if c.Unrecorded {
				if _, err := fmt.Fprint(errOut, missingLastApplied(c, kinds)); err != nil {
					return err
				}
			}
			if _, err := fmt.Fprintln(w, changeLine(c, kinds)); err != nil {
				return err
			}
			if c.Action == api.ActionSkipped && c.Reason != "" {
				// Why: an inert kind's, or a cluster's machinery (an Endpoints applied
				// alone, as egress-kubernetes-services applies one, is not silently lost).
				k, ok := kinds.Lookup(c.Kind)
				if group, inert := inertGroups[c.Kind]; inert {
					k, ok = api.Kind{Kind: c.Kind, Group: group}, true
				}
				if !ok {
					k = api.Kind{Kind: c.Kind}
				}
				if _, err := fmt.Fprintf(errOut, "Warning: %s/%s is not kept by the lab: %s\n", k.Resource(false), c.Name, c.Reason); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// inertGroups are the API groups of the Kubernetes kinds a lab accepts and keeps no copy
// of, as they change nothing a lab runs (RBAC, autoscalers, disruption budgets...: the
// lab's config package says why of each). "" is the core group.
var inertGroups = map[string]string{
	"ControllerRevision":             "apps",
	"Lease":                          "coordination.k8s.io",
	"Role":                           "rbac.authorization.k8s.io",
	"RoleBinding":                    "rbac.authorization.k8s.io",
	"ClusterRole":                    "rbac.authorization.k8s.io",
	"ClusterRoleBinding":             "rbac.authorization.k8s.io",
	"CustomResourceDefinition":       "apiextensions.k8s.io",
	"MutatingWebhookConfiguration":   "admissionregistration.k8s.io",
	"ValidatingWebhookConfiguration": "admissionregistration.k8s.io",
	"PodDisruptionBudget":            "policy",
	"HorizontalPodAutoscaler":        "autoscaling",
	"LimitRange":                     "",
	"ResourceQuota":                  "",
	"PriorityClass":                  "scheduling.k8s.io",
	"Node":                           "",
	"APIService":                     "apiregistration.k8s.io",
	"StorageClass":                   "storage.k8s.io",
	"PersistentVolume":               "",
	"PersistentVolumeClaim":          "",
	"CertificateSigningRequest":      "certificates.k8s.io",
}

// changeLine renders one change as kubectl prints it: `service/details created`,
// `deployment.apps/details-v1 configured`, `virtualservice.networking.istio.io/reviews
// unchanged`; a delete as `service "details" deleted`; a kind the lab accepts without
// keeping it as kubectl's create, `clusterrole.rbac.authorization.k8s.io/x created`. The
// pods an apply or delete made or removed keep meshlab's line, `pod NAMESPACE/NAME
// created|deleted|FAILED: why`, as does an object of a cluster's dump that the lab makes
// itself (`skipped`).
func changeLine(c api.Change, kinds api.Kinds) string {
	if c.Kind == api.PodKind {
		return c.String()
	}
	k, ok := kinds.Lookup(c.Kind)
	if !ok {
		k = api.Kind{Kind: c.Kind}
	}
	action := c.Action
	if group, inert := inertGroups[c.Kind]; inert && action == api.ActionSkipped {
		k, action = api.Kind{Kind: c.Kind, Group: group}, api.ActionCreated
	}
	res := k.Resource(false)
	s := res + "/" + c.Name + " " + action
	if action == api.ActionDeleted {
		s = fmt.Sprintf("%s %q deleted", res, c.Name)
	}
	if c.Error != "" {
		s += " with errors: " + c.Error
	}
	return s
}

// missingLastApplied is kubectl apply's warning for an object it replaces that no apply
// recorded (made by create): resource as RESOURCE/NAME (the plural, no group).
func missingLastApplied(c api.Change, kinds api.Kinds) string {
	k, ok := kinds.Lookup(c.Kind)
	if !ok {
		k = api.Kind{Kind: c.Kind}
	}
	return "Warning: resource " + k.Resource(true) + "/" + c.Name + " is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by kubectl apply. " +
		"kubectl apply should only be used on resources created declaratively by either kubectl create --save-config or kubectl apply. The missing annotation will be patched automatically.\n"
}
