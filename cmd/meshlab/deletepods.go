package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/meshlab/meshlab/api"
)

// deletedPodsAnnotation is deletedPodsAnnotation: on a workload, the names of its
// pods deleted one by one (a JSON list), whose successors the lab names apart.
const deletedPodsAnnotation = "meshlab.dev/deleted-pods"

// kubectl delete pod: a pod written as a Pod object goes with it; a pod a Deployment,
// ReplicaSet or DaemonSet made is replaced, as its ReplicaSet (or DaemonSet) makes a new
// pod, of a new name, for each one deleted: the lab keeps the deleted pods' names on
// their workload (model.AnnotationDeletedPods), and applying it makes the successors,
// which start afresh (new processes, new certificates in the mesh's trust domain of
// now). The trust domain migration page's `kubectl delete pod --all` relies on that.

// podDeletion is what delete pod was asked: the pods named (nil: every pod, or those of
// selector) in namespace ("" for every namespace).
type podDeletion struct {
	namespace      string
	names          []string
	selector       string
	ignoreNotFound bool
}

// deletePods deletes the pods d names and prints kubectl's line for each.
func deletePods(ctx context.Context, c *api.Client, d podDeletion, out, errOut io.Writer) error {
	objs, err := c.Objects(ctx, "", d.namespace, "")
	if err != nil {
		return err
	}
	written := map[string]bool{} // namespace/name of the Pod objects
	owners := map[string][]*metaObject{}
	for _, o := range objs {
		switch {
		case o.Kind == "Pod":
			written[o.Namespace+"/"+o.Name] = true
		case slices.Contains(workloadKinds, o.Kind):
			mo, err := newMetaObject(api.Kind{Kind: o.Kind, Group: "apps"}, o)
			if err != nil {
				return err
			}
			owners[o.Namespace] = append(owners[o.Namespace], mo)
		}
	}
	pods, err := c.KubeObjects(ctx, "pod", d.namespace, "", d.selector)
	if err != nil {
		return err
	}
	var (
		refs    []api.ObjectRef
		changed []*metaObject
		lines   []string
		found   = map[string]bool{}
	)
	for _, p := range pods {
		if d.names != nil && !slices.Contains(d.names, p.Name) {
			continue
		}
		found[p.Name] = true
		lines = append(lines, fmt.Sprintf("pod %q deleted", p.Name))
		if written[p.Namespace+"/"+p.Name] {
			refs = append(refs, api.ObjectRef{Kind: "Pod", Namespace: p.Namespace, Name: p.Name})
			continue
		}
		owner := podOwner(owners[p.Namespace], p.Name)
		switch {
		case owner == nil:
			return fmt.Errorf("delete pod %s/%s: it is made by the lab (istioctl install's gateways, a Gateway's deployment, ztunnel) from no object of yours, and the lab does not replace it: "+
				"to start it afresh, delete and apply what made it (meshlab uninstall, then install; the Gateway)", p.Namespace, p.Name)
		case owner.kind.Kind == "StatefulSet":
			return fmt.Errorf("delete pod %s/%s: a StatefulSet's pod comes back under its own name, which the lab does not restart in place: "+
				"delete the StatefulSet and apply it again (meshlab delete -f FILE; meshlab apply -f FILE)", p.Namespace, p.Name)
		}
		if err := owner.addDeletedPod(p.Name); err != nil {
			return err
		}
		if !slices.Contains(changed, owner) {
			changed = append(changed, owner)
		}
	}
	var missing []error
	for _, n := range d.names {
		if !found[n] && !d.ignoreNotFound {
			missing = append(missing, notFound(api.Kind{Kind: "Pod", Names: []string{"pod", "pods", "po"}}, n))
		}
	}
	if len(lines) == 0 {
		if d.names == nil {
			if d.namespace == "" {
				fmt.Fprintln(errOut, "No resources found")
			} else {
				fmt.Fprintf(errOut, "No resources found in %s namespace.\n", d.namespace)
			}
		}
		return errors.Join(missing...)
	}
	var files []api.ConfigFile
	for _, o := range changed {
		js, err := o.json()
		if err != nil {
			return err
		}
		files = append(files, o.asFile(js))
	}
	if len(files) > 0 {
		if _, err := c.Apply(ctx, files); err != nil {
			return err
		}
	}
	if len(refs) > 0 {
		if _, err := c.Delete(ctx, api.DeleteRequest{Refs: refs}); err != nil {
			return err
		}
	}
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return errors.Join(missing...)
}

// addDeletedPod adds pod to the workload's deletedPodsAnnotation.
func (o *metaObject) addDeletedPod(pod string) error {
	annotations := o.values("annotations")
	var names []string
	if s, ok := annotations[deletedPodsAnnotation]; ok {
		if err := json.Unmarshal([]byte(s), &names); err != nil {
			return fmt.Errorf("%s: annotation %s: %w", o.ref(), deletedPodsAnnotation, err)
		}
	}
	if slices.Contains(names, pod) {
		return nil
	}
	b, err := json.Marshal(append(names, pod))
	if err != nil {
		return err
	}
	annotations[deletedPodsAnnotation] = string(b)
	o.setValues("annotations", annotations)
	return nil
}
