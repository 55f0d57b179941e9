package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshlab/meshlab/api"
)

// kubectl label and kubectl annotate: both read an object of the lab, change one map of
// its metadata and apply it back, so the change is validated, journalled and pushed as
// any apply is (a namespace's istio-injection label decides the sidecar of the pods made
// after it, its istio.io/dataplane-mode label reaches the ambient node agent). Pods that
// a Deployment (or another workload) makes are not objects of the lab: their labels are
// their template's, and label says so instead of pretending.

// metaVerb is what differs between label and annotate.
type metaVerb struct {
	name  string // "label", "annotate"
	field string // metadata's map: "labels", "annotations"
	done  string // what kubectl prints after the object: "labeled", "annotated"
	// checkValue returns the problems of a value (labels have a syntax, annotations none).
	checkValue func(string) []string
}

var (
	labelVerb = metaVerb{name: "label", field: "labels", done: "labeled", checkValue: validation.IsValidLabelValue}
	annotVerb = metaVerb{name: "annotate", field: "annotations", done: "annotated", checkValue: func(string) []string { return nil }}
)

// metaConfig is what label and annotate read from their flags.
type metaConfig struct {
	overwrite bool
	all       bool
	selector  string
	namespace string
	list      bool
}

func newLabelCmd(g *globalFlags) *cobra.Command {
	return newMetaCmd(g, labelVerb, "Update the labels of an object of a running lab, as kubectl label",
		`  meshlab label namespace default istio-injection=enabled
  meshlab label namespace default istio.io/dataplane-mode=ambient
  meshlab label namespace default istio-injection=disabled --overwrite
  meshlab label namespace default istio-injection-`)
}

func newAnnotateCmd(g *globalFlags) *cobra.Command {
	return newMetaCmd(g, annotVerb, "Update the annotations of an object of a running lab, as kubectl annotate",
		`  meshlab annotate gateway bookinfo-gateway networking.istio.io/service-type=ClusterIP
  meshlab annotate deployment/httpbin proxy.istio.io/config-
  meshlab annotate -n foo vs reviews note='canary' --overwrite`)
}

func newMetaCmd(g *globalFlags, verb metaVerb, short, example string) *cobra.Command {
	cfg := &metaConfig{}
	cmd := &cobra.Command{
		Use:     verb.name + " [--overwrite] (TYPE NAME... | TYPE/NAME... | TYPE --all | TYPE -l SELECTOR) KEY_1=VAL_1 ... KEY_N=VAL_N | KEY-",
		Short:   short,
		Example: example,
		Long: short + `. KEY=VALUE sets, KEY- removes; changing an existing value needs --overwrite,
as kubectl's. The object is applied back to the lab as an apply would (validated,
journalled, pushed). A namespace no object declares (default, istio-system, or one the
lab's objects use) is created as a Namespace object with the change. Pods made by a
Deployment, ReplicaSet, StatefulSet or DaemonSet take their metadata from its template:
change the template instead.`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeArgs(true, labKinds(g), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			return runMeta(cmd.Context(), c, verb, cfg, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&cfg.overwrite, "overwrite", false, "allow changing a key that already has a value, as kubectl's")
	cmd.Flags().BoolVar(&cfg.all, "all", false, "every object of the type in the namespace")
	cmd.Flags().StringVarP(&cfg.selector, "selector", "l", "", "the objects of the type whose labels match, as kubectl's -l")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "default", "namespace of the objects (ignored for namespaces)")
	cmd.Flags().BoolVar(&cfg.list, "list", false, "print the object's current "+verb.field+" instead of changing them")
	return cmd
}

// metaTarget is one object label or annotate changes.
type metaTarget struct {
	kind api.Kind
	name string
}

// splitMetaArgs separates kubectl's object arguments from its KEY=VALUE and KEY- ones.
func splitMetaArgs(args []string) (objects, pairs []string) {
	for _, a := range args {
		if strings.Contains(a, "=") || (strings.HasSuffix(a, "-") && len(a) > 1) {
			pairs = append(pairs, a)
			continue
		}
		objects = append(objects, a)
	}
	return objects, pairs
}

// parseMetaPairs reads KEY=VALUE and KEY- arguments, checking keys (and, for labels,
// values) as the API server does.
func parseMetaPairs(verb metaVerb, pairs []string) (set map[string]string, remove []string, err error) {
	set = map[string]string{}
	for _, p := range pairs {
		if key, ok := strings.CutSuffix(p, "-"); ok && !strings.Contains(p, "=") {
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return nil, nil, fmt.Errorf("invalid %s key %q: %s", strings.TrimSuffix(verb.field, "s"), key, strings.Join(errs, "; "))
			}
			remove = append(remove, key)
			continue
		}
		key, value, _ := strings.Cut(p, "=")
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, nil, fmt.Errorf("invalid %s key %q: %s", strings.TrimSuffix(verb.field, "s"), key, strings.Join(errs, "; "))
		}
		if errs := verb.checkValue(value); len(errs) > 0 {
			return nil, nil, fmt.Errorf("invalid %s value: %q: %s", strings.TrimSuffix(verb.field, "s"), p, strings.Join(errs, "; "))
		}
		set[key] = value
	}
	for _, k := range remove {
		if _, both := set[k]; both {
			return nil, nil, fmt.Errorf("can not both modify and remove the following %s in the same command: %s", verb.field, k)
		}
	}
	return set, remove, nil
}

// kindResolver resolves what a user typed as a type against the lab's kinds (pods too).
func kindResolver(ctx context.Context, c *api.Client) (func(string) (api.Kind, error), error) {
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	return func(s string) (api.Kind, error) {
		if isPodsKind(s) {
			return api.Kind{Kind: "Pod", Names: []string{"pod", "pods", "po"}}, nil
		}
		k, ok := kinds.Lookup(s)
		if !ok {
			return api.Kind{}, fmt.Errorf("the server doesn't have a resource type %q", s)
		}
		return k, nil
	}, nil
}

// resolveMetaTargets reads kubectl's TYPE NAME... or TYPE/NAME... arguments.
func resolveMetaTargets(lookup func(string) (api.Kind, error), objects []string) ([]metaTarget, error) {
	if len(objects) == 0 {
		return nil, errors.New("one or more resources must be specified as <resource> <name> or <resource>/<name>")
	}
	var out []metaTarget
	if _, _, slash := strings.Cut(objects[0], "/"); !slash {
		k, err := lookup(objects[0])
		if err != nil {
			return nil, err
		}
		if len(objects) == 1 {
			return nil, errors.New("one or more resources must be specified as <resource> <name> or <resource>/<name>")
		}
		for _, n := range objects[1:] {
			if strings.Contains(n, "/") {
				return nil, errors.New("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form")
			}
			out = append(out, metaTarget{kind: k, name: n})
		}
		return out, nil
	}
	for _, a := range objects {
		t, n, ok := strings.Cut(a, "/")
		if !ok || n == "" || strings.Contains(n, "/") {
			return nil, fmt.Errorf("arguments in resource/name form must have a single resource and name: %q", a)
		}
		k, err := lookup(t)
		if err != nil {
			return nil, err
		}
		out = append(out, metaTarget{kind: k, name: n})
	}
	return out, nil
}

// clusterScoped reports whether objects of kind k belong to no namespace.
func clusterScoped(k api.Kind) bool {
	return k.Kind == "Namespace" || k.Kind == "GatewayClass" || k.Kind == "IngressClass" || strings.HasPrefix(k.Kind, "Cluster")
}

// builtinNamespaces exist in every cluster (istio-system once Istio is installed, which a
// lab always is).
var builtinNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease", "istio-system"}

// metaObject is one object read from the lab to be changed.
type metaObject struct {
	kind      api.Kind
	namespace string
	name      string
	file      string
	obj       map[string]any
	// owner is the workload that made this pod (nil for any other object): the pod's
	// labels are changed in the owner's podLabelsAnnotation, as a running pod's are.
	owner *metaObject
}

func (o *metaObject) meta() map[string]any {
	m, _ := o.obj["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o.obj["metadata"] = m
	}
	return m
}

// values returns the object's labels or annotations (a copy).
func (o *metaObject) values(field string) map[string]string {
	out := map[string]string{}
	m, _ := o.meta()[field].(map[string]any)
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

func (o *metaObject) setValues(field string, vals map[string]string) {
	if len(vals) == 0 {
		delete(o.meta(), field)
		return
	}
	m := map[string]any{}
	for k, v := range vals {
		m[k] = v
	}
	o.meta()[field] = m
}

// ref is kubectl's name of the object in what it prints: namespace/default,
// deployment.apps/httpbin, gateway.networking.istio.io/bookinfo-gateway.
func (o *metaObject) ref() string { return o.kind.Resource(false) + "/" + o.name }

// notFound is the API server's answer for a missing object, as kubectl prints it.
func notFound(k api.Kind, name string) error {
	res := k.Resource(true)
	if k.Group != "" {
		res += "." + k.Group
	}
	return &notFoundError{msg: fmt.Sprintf("Error from server (NotFound): %s %q not found", res, name)}
}

// notFoundError is notFound's error, which get of several names tells from others.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// decodeObject reads an object as the lab holds it, keeping its numbers as written.
func decodeObject(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// selectMetaObjects returns the objects of kind k in namespace (--all) whose labels
// match selector (-l).
func selectMetaObjects(ctx context.Context, c *api.Client, k api.Kind, namespace, selector string) ([]*metaObject, error) {
	if clusterScoped(k) {
		namespace = ""
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", selector, err)
	}
	objs, err := objectsOf(ctx, c, k, namespace, "")
	if err != nil {
		return nil, err
	}
	var out []*metaObject
	for _, o := range objs {
		mo, err := newMetaObject(k, o)
		if err != nil {
			return nil, err
		}
		if sel.Matches(labels.Set(mo.values("labels"))) {
			out = append(out, mo)
		}
	}
	return out, nil
}

func newMetaObject(k api.Kind, o api.ConfigObject) (*metaObject, error) {
	obj, err := decodeObject(o.Object)
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	return &metaObject{kind: k, namespace: o.Namespace, name: o.Name, file: o.File, obj: obj}, nil
}

// readMetaObject reads one target: the lab's object, or a namespace that exists without
// one.
func readMetaObject(ctx context.Context, c *api.Client, namespace string, t metaTarget) (*metaObject, error) {
	ns := namespace
	if clusterScoped(t.kind) {
		ns = ""
	}
	objs, err := objectsOf(ctx, c, t.kind, ns, t.name)
	if err != nil {
		return nil, err
	}
	if len(objs) > 0 {
		return newMetaObject(t.kind, objs[0])
	}
	switch t.kind.Kind {
	case "Namespace":
		exists, err := namespaceExists(ctx, c, t.name)
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, notFound(t.kind, t.name)
		}
		return &metaObject{kind: t.kind, name: t.name, file: "<namespace " + t.name + ">", obj: namespaceObject(t.name)}, nil
	}
	return nil, notFound(t.kind, t.name)
}

// objectsOf lists the lab's objects of kind k as written: the lab's kinds, and Pod
// objects, which the lab API lists among every kind's (its pods are a view of their own).
func objectsOf(ctx context.Context, c *api.Client, k api.Kind, namespace, name string) ([]api.ConfigObject, error) {
	if k.Kind != "Pod" {
		return c.Objects(ctx, k.Kind, namespace, name)
	}
	all, err := c.Objects(ctx, "", namespace, name)
	if err != nil {
		return nil, err
	}
	var out []api.ConfigObject
	for _, o := range all {
		if o.Kind == "Pod" {
			out = append(out, o)
		}
	}
	return out, nil
}

// namespaceObject is a Namespace object with nothing but its name.
func namespaceObject(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
}

// namespaceExists reports whether a namespace no object declares exists as a cluster's
// would: a built-in one, or one that objects of the lab are in.
func namespaceExists(ctx context.Context, c *api.Client, name string) (bool, error) {
	if slices.Contains(builtinNamespaces, name) {
		return true, nil
	}
	objs, err := c.Objects(ctx, "", name, "")
	if err != nil {
		return false, err
	}
	return len(objs) > 0, nil
}

// runMeta is label and annotate: read, check, change, apply, print as kubectl.
func runMeta(ctx context.Context, c *api.Client, verb metaVerb, cfg *metaConfig, args []string, out io.Writer) error {
	objects, pairs := splitMetaArgs(args)
	if len(pairs) == 0 && !cfg.list {
		return fmt.Errorf("at least one %s update is required", strings.TrimSuffix(verb.field, "s"))
	}
	set, remove, err := parseMetaPairs(verb, pairs)
	if err != nil {
		return err
	}
	lookup, err := kindResolver(ctx, c)
	if err != nil {
		return err
	}
	var objs []*metaObject
	if cfg.all || cfg.selector != "" {
		if len(objects) != 1 || strings.Contains(objects[0], "/") {
			return errors.New("--all and -l take one resource type and no names")
		}
		k, err := lookup(objects[0])
		if err != nil {
			return err
		}
		if k.Kind == "Pod" {
			objs, err = podMetaObjects(ctx, c, verb, cfg.namespace, nil, cfg.selector)
		} else {
			objs, err = selectMetaObjects(ctx, c, k, cfg.namespace, cfg.selector)
		}
		if err != nil {
			return err
		}
	} else {
		targets, err := resolveMetaTargets(lookup, objects)
		if err != nil {
			return err
		}
		var pods []string
		for _, t := range targets {
			if t.kind.Kind == "Pod" {
				pods = append(pods, t.name)
				continue
			}
			o, err := readMetaObject(ctx, c, cfg.namespace, t)
			if err != nil {
				return err
			}
			objs = append(objs, o)
		}
		if len(pods) > 0 {
			po, err := podMetaObjects(ctx, c, verb, cfg.namespace, pods, "")
			if err != nil {
				return err
			}
			objs = append(objs, po...)
		}
	}
	if cfg.list {
		for _, o := range objs {
			vals := o.values(verb.field)
			for _, k := range slices.Sorted(maps.Keys(vals)) {
				fmt.Fprintf(out, "%s=%s\n", k, vals[k])
			}
		}
		return nil
	}
	var files []api.ConfigFile
	written := map[*metaObject]int{} // a workload's index in files: its pods share it
	var lines []string
	for _, o := range objs {
		cur := o.values(verb.field)
		if !cfg.overwrite {
			if err := checkNoOverwrite(verb, cur, set); err != nil {
				return err
			}
		}
		next := maps.Clone(cur)
		maps.Copy(next, set)
		for _, k := range remove {
			if _, ok := next[k]; !ok && verb.field == "labels" {
				lines = append(lines, fmt.Sprintf("label %q not found.", k))
			}
			delete(next, k)
		}
		if maps.Equal(cur, next) && verb.field == "labels" {
			lines = append(lines, o.ref()+" not "+verb.done)
			continue
		}
		done := verb.done
		if verb.field == "labels" && !cfg.overwrite && len(next) < len(cur) {
			done = "unlabeled" // kubectl's word when a label went and none came
		}
		lines = append(lines, o.ref()+" "+done)
		o.setValues(verb.field, next)
		target := o
		if o.owner != nil {
			if err := o.owner.setPodLabels(o.name, next); err != nil {
				return err
			}
			target = o.owner
		}
		data, err := json.Marshal(target.obj)
		if err != nil {
			return fmt.Errorf("render %s: %w", target.ref(), err)
		}
		f := api.ConfigFile{Name: target.file, Data: string(data)}
		if !clusterScoped(target.kind) {
			f.Namespace = target.namespace
		}
		if i, ok := written[target]; ok {
			files[i] = f
			continue
		}
		written[target] = len(files)
		files = append(files, f)
	}
	if len(files) > 0 {
		if _, err := c.Apply(ctx, files); err != nil {
			return err
		}
	}
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}

// checkNoOverwrite refuses to change a key that has a value without --overwrite, in
// kubectl's words: a label may be set again to the value it has, an annotation may not.
func checkNoOverwrite(verb metaVerb, cur, set map[string]string) error {
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		v, ok := cur[k]
		if !ok {
			continue
		}
		switch {
		case verb.field == "labels" && v != set[k]:
			problems = append(problems, fmt.Sprintf("'%s' already has a value (%s), and --overwrite is false", k, v))
		case verb.field == "annotations":
			problems = append(problems, fmt.Sprintf("'%s' already has a value (%s)", k, v))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if verb.field == "annotations" {
		return fmt.Errorf("--overwrite is false but found the following declared annotation(s): %s", strings.Join(problems, "; "))
	}
	return errors.New(strings.Join(problems, "\n"))
}

// podLabelsAnnotation is model.AnnotationPodLabels: on a workload, the labels of the pods
// labelled one by one ({"pod": {"key": "value"}}), which the lab gives those pods
// instead of their template's.
const podLabelsAnnotation = "meshlab.dev/pod-labels"

// workloadKinds are the kinds whose objects make pods.
var workloadKinds = []string{"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"}

// podMetaObjects returns the pods of namespace that label or annotate changes: those
// named (nil for any) that selector picks. A Pod object is changed as written; a pod a
// workload made is changed as kubectl changes a running pod, its labels only (kept on its
// workload, podLabelsAnnotation; its annotations are its template's).
func podMetaObjects(ctx context.Context, c *api.Client, verb metaVerb, namespace string, names []string, selector string) ([]*metaObject, error) {
	podKind := api.Kind{Kind: "Pod", Names: []string{"pod", "pods", "po"}}
	all, err := c.Objects(ctx, "", namespace, "")
	if err != nil {
		return nil, err
	}
	written := map[string]api.ConfigObject{}
	var owners []*metaObject
	for _, o := range all {
		switch {
		case o.Kind == "Pod":
			written[o.Name] = o
		case slices.Contains(workloadKinds, o.Kind):
			k := api.Kind{Kind: o.Kind, Group: "apps"}
			mo, err := newMetaObject(k, o)
			if err != nil {
				return nil, err
			}
			owners = append(owners, mo)
		}
	}
	pods, err := c.KubeObjects(ctx, "pod", namespace, "", selector)
	if err != nil {
		return nil, err
	}
	var out []*metaObject
	found := map[string]bool{}
	for _, p := range pods {
		if names != nil && !slices.Contains(names, p.Name) {
			continue
		}
		found[p.Name] = true
		if w, ok := written[p.Name]; ok {
			mo, err := newMetaObject(podKind, w)
			if err != nil {
				return nil, err
			}
			out = append(out, mo)
			continue
		}
		owner := podOwner(owners, p.Name)
		if owner == nil || verb.field != "labels" {
			return nil, fmt.Errorf("pod %s/%s is made from a workload's template, whose annotations it has: change them there (spec.template.metadata) and apply it", namespace, p.Name)
		}
		view, err := decodeObject(p.Object)
		if err != nil {
			return nil, fmt.Errorf("read pod %s/%s: %w", namespace, p.Name, err)
		}
		out = append(out, &metaObject{kind: podKind, namespace: p.Namespace, name: p.Name, obj: view, owner: owner})
	}
	for _, n := range names {
		if !found[n] {
			return nil, notFound(podKind, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no objects passed to %s", verb.name)
	}
	return out, nil
}

// podOwner returns the workload that made the pod: the one whose name, with a dash,
// begins the pod's name (the longest such name, so reviews-v2 over reviews).
func podOwner(owners []*metaObject, pod string) *metaObject {
	var best *metaObject
	for _, o := range owners {
		if strings.HasPrefix(pod, o.name+"-") && (best == nil || len(o.name) > len(best.name)) {
			best = o
		}
	}
	return best
}

// setPodLabels records labels as the whole label set of the workload's pod.
func (o *metaObject) setPodLabels(pod string, labels map[string]string) error {
	annotations := o.values("annotations")
	set := map[string]map[string]string{}
	if s, ok := annotations[podLabelsAnnotation]; ok {
		if err := json.Unmarshal([]byte(s), &set); err != nil {
			return fmt.Errorf("%s: annotation %s: %w", o.ref(), podLabelsAnnotation, err)
		}
	}
	set[pod] = labels
	b, err := json.Marshal(set)
	if err != nil {
		return err
	}
	annotations[podLabelsAnnotation] = string(b)
	o.setValues("annotations", annotations)
	return nil
}
