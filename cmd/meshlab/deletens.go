package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/api"
)

// kubectl delete namespace: the API server's namespace controller deletes every object
// of the namespace, then the namespace. A lab's namespaces are the Namespace objects
// written to it and those its objects live in (lab/kubeview.go), so deleting one takes
// out, in one Delete (one config change, one push to the proxies, as istiod sees the
// objects go), every namespaced object stored in it (Deployments and their pods, Pods,
// Services, ServiceAccounts, Secrets, ConfigMaps, RBAC, Istio's and the Gateway API's
// kinds, Telemetry...) and its Namespace object: the pods are stopped and their network
// namespaces and run directories removed as delete pod does, and a namespace created
// again starts empty. istio-system holds the lab's control plane in Kubernetes; a lab's
// control plane is its own and stays while the lab runs, so deleting istio-system does
// what uninstall --purge does (the installed mesh config goes) besides deleting the
// objects stored in it.

// immortalNamespaces are the namespaces the API server's NamespaceLifecycle admission
// refuses to delete. kube-node-lease is not among them: Kubernetes deletes it and makes
// it again, as a lab lists it again.
var immortalNamespaces = []string{"default", "kube-system", "kube-public"}

// istioSystem is the namespace of Istio's control plane.
const istioSystem = "istio-system"

// isNamespaceKind reports whether kind names Namespace, as kubectl spells it.
func isNamespaceKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "namespace", "namespaces", "ns":
		return true
	}
	return false
}

// namespaceNames returns the namespaces delete's arguments name (ns NAME..., or
// ns/NAME...), reporting whether they name namespaces only.
func namespaceNames(args []string) ([]string, bool) {
	if len(args) == 0 {
		return nil, false
	}
	if kind, _, slash := strings.Cut(args[0], "/"); !slash {
		if !isNamespaceKind(kind) || len(args) == 1 {
			return nil, false
		}
		return args[1:], true
	}
	var names []string
	for _, a := range args {
		kind, name, ok := strings.Cut(a, "/")
		if !ok || !isNamespaceKind(kind) {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}

// namespacedKind reports whether objects of kind belong to a namespace: a
// cluster-scoped object applied with -n keeps that namespace in the lab's record, but
// is no part of it.
func namespacedKind(kind string) bool {
	switch kind {
	case "MeshConfig", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "CustomResourceDefinition", "PriorityClass", "StorageClass":
		return false
	}
	return !clusterScoped(api.Kind{Kind: kind})
}

// nsDeletion is what delete namespace was asked.
type nsDeletion struct {
	names          []string
	ignoreNotFound bool
	output         string
}

// namespaceRefs returns the objects deleting the namespace ns removes from objs (the
// lab's objects): its namespaced objects and its Namespace object, and for istio-system
// the installed mesh config, as uninstall --purge removes it.
func namespaceRefs(ns string, objs []api.ConfigObject) []api.ObjectRef {
	var refs []api.ObjectRef
	for _, o := range objs {
		switch {
		case o.Kind == "Namespace" && o.Name == ns,
			o.Kind == "MeshConfig" && ns == istioSystem,
			o.Namespace == ns && namespacedKind(o.Kind):
			refs = append(refs, api.ObjectRef{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
		}
	}
	return refs
}

// checkNamespaceNames returns the names the API server deletes, in order and once
// each, and the error of each it refuses (immortal) or does not have (not in have).
func checkNamespaceNames(names []string, have map[string]bool, ignoreNotFound bool) ([]string, []error) {
	var del []string
	var errs []error
	for _, n := range names {
		switch {
		case slices.Contains(immortalNamespaces, n):
			errs = append(errs, fmt.Errorf("Error from server (Forbidden): namespaces %q is forbidden: this namespace may not be deleted", n)) //nolint:staticcheck // the API server's text
		case !have[n]:
			if !ignoreNotFound {
				errs = append(errs, fmt.Errorf("Error from server (NotFound): namespaces %q not found", n)) //nolint:staticcheck // kubectl's text
			}
		case !slices.Contains(del, n):
			del = append(del, n)
		}
	}
	return del, errs
}

// deleteNamespaces deletes the namespaces d names with every object in them, in one
// change, and prints kubectl's line for each; each it refuses or does not find is its
// error on errOut (the others still go) and exit status 1.
func deleteNamespaces(ctx context.Context, c *api.Client, d nsDeletion, out, errOut io.Writer) error {
	listed, err := c.KubeObjects(ctx, "namespace", "", "", "")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, o := range listed {
		have[o.Name] = true
	}
	del, errs := checkNamespaceNames(d.names, have, d.ignoreNotFound)
	if len(del) == 0 {
		return errors.Join(errs...)
	}
	objs, err := c.Objects(ctx, "", "", "")
	if err != nil {
		return err
	}
	var r api.DeleteRequest
	for _, ns := range del {
		for _, ref := range namespaceRefs(ns, objs) {
			if !slices.Contains(r.Refs, ref) {
				r.Refs = append(r.Refs, ref)
			}
		}
	}
	if len(r.Refs) > 0 {
		changes, err := c.Delete(ctx, r)
		if err != nil {
			return fmt.Errorf("delete namespace %s: %w", strings.Join(del, ", "), err)
		}
		for _, ch := range changes {
			if ch.Kind == api.PodKind && ch.Error != "" {
				fmt.Fprintf(errOut, "Warning: %s\n", ch.String())
			}
		}
	}
	changes := make([]api.Change, len(del))
	for i, ns := range del {
		changes[i] = api.Change{Kind: "Namespace", Name: ns, Action: api.ActionDeleted}
	}
	kinds, _ := c.Kinds(ctx)
	if err := printChanges(out, errOut, d.output, changes, kinds); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// namespacesOfFiles returns the names of the Namespace objects of files, in order.
func namespacesOfFiles(files []api.ConfigFile) ([]string, error) {
	var names []string
	_, _, err := filterFileObjects(files, func(_ api.ConfigFile, h fileHeader) bool {
		if h.Kind == "Namespace" && h.Metadata.Name != "" {
			names = append(names, h.Metadata.Name)
		}
		return true
	})
	return names, err
}
