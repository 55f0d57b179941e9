package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/meshlab/meshlab/api"
)

// jsonpathOutput reads kubectl's template output formats, -o jsonpath=TEMPLATE,
// jsonpath-as-json=TEMPLATE and jsonpath-file=FILE. It reports whether format is one;
// the error names the format when its template is missing or its file unreadable.
func jsonpathOutput(format string) (tmpl string, asJSON, ok bool, err error) {
	kind, arg, found := strings.Cut(format, "=")
	switch kind {
	case "jsonpath", "jsonpath-as-json":
		asJSON = kind == "jsonpath-as-json"
	case "jsonpath-file":
		if !found || arg == "" {
			return "", false, true, fmt.Errorf("-o %s: needs a file: -o jsonpath-file=FILE", kind)
		}
		b, err := os.ReadFile(arg)
		if err != nil {
			return "", false, true, fmt.Errorf("-o jsonpath-file: %w", err)
		}
		return string(b), false, true, nil
	default:
		return "", false, false, nil
	}
	if !found || arg == "" {
		return "", false, true, fmt.Errorf("-o %s: needs a template, as -o %s='{.items[*].metadata.name}'", kind, kind)
	}
	return arg, asJSON, true, nil
}

// jsonpathPrinter runs a kubectl JSONPath template (k8s.io/client-go/util/jsonpath, as
// kubectl's JSONPathPrinter) over objects: missing keys print nothing, as kubectl's
// default --allow-missing-template-keys.
type jsonpathPrinter struct {
	raw string
	jp  *jsonpath.JSONPath
}

func newJSONPathPrinter(tmpl string, asJSON bool) (*jsonpathPrinter, error) {
	jp := jsonpath.New("out").AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("-o jsonpath: parse template %q: %w", tmpl, err)
	}
	jp.EnableJSONOutput(asJSON)
	return &jsonpathPrinter{raw: tmpl, jp: jp}, nil
}

// print runs the template over one object, or over kubectl's List of items when list is
// set (what `kubectl get KIND` without a name prints, so `{.items..metadata.name}`
// works).
func (p *jsonpathPrinter) print(w io.Writer, items []json.RawMessage, list bool) error {
	var obj any
	if list || len(items) != 1 {
		l := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}}
		objs := make([]any, 0, len(items))
		for _, it := range items {
			o, err := decodeUnstructured(it)
			if err != nil {
				return err
			}
			objs = append(objs, o)
		}
		l["items"] = objs
		obj = l
	} else {
		o, err := decodeUnstructured(items[0])
		if err != nil {
			return err
		}
		obj = o
	}
	var buf bytes.Buffer
	if err := p.jp.Execute(&buf, obj); err != nil {
		return fmt.Errorf("error executing jsonpath %q: %w", p.raw, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// decodeUnstructured decodes JSON as Kubernetes' unstructured content does: integers as
// int64 (so `{.spec.ports[0].port}` prints 80 and `?(@.port==80)` compares), other
// numbers as float64.
func decodeUnstructured(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return convertNumbers(v), nil
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// getJSONPath answers `get KIND [NAME] -o jsonpath=...` from the lab's Kubernetes view
// (lab/kubeview.go): one object when NAME is given, else kubectl's List.
func getJSONPath(ctx context.Context, c *api.Client, cfg *getConfig, kind, name, tmpl string, asJSON bool, out io.Writer) error {
	if kind == "all" {
		return errors.New("-o jsonpath: name a kind (pods, svc, deploy, gtw, ...), not all")
	}
	p, err := newJSONPathPrinter(tmpl, asJSON)
	if err != nil {
		return err
	}
	objs, err := c.KubeObjects(ctx, kind, cfg.namespace, name, cfg.selector)
	if err != nil {
		return err
	}
	if name != "" && len(objs) == 0 {
		return missingObject(ctx, c, kind, cfg.namespace, name)
	}
	if name != "" && len(objs) > 1 {
		return ambiguousName(kind, name, objs)
	}
	items := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		items[i] = o.Object
	}
	return p.print(out, items, name == "")
}

// getSelected is `get KIND -l SELECTOR` in the text, json and yaml forms: the objects
// the selector picks from the lab's Kubernetes view, shown as get shows them.
func getSelected(ctx context.Context, c *api.Client, cfg *getConfig, kind, name string, out io.Writer) error {
	objs, err := c.KubeObjects(ctx, kind, cfg.namespace, name, cfg.selector)
	if err != nil {
		return err
	}
	if isPodsKind(kind) {
		keep := map[string]bool{}
		for _, o := range objs {
			keep[o.Namespace+"/"+o.Name] = true
		}
		return getPodsWhere(ctx, c, cfg, name, out, func(p api.PodStatus) bool { return keep[p.Namespace+"/"+p.Name] })
	}
	return printKubeObjects(cfg, objs, false, out)
}

// missingObject is the error for a named object the lab does not have: the pods or
// objects of that kind it does have.
func missingObject(ctx context.Context, c *api.Client, kind, namespace, name string) error {
	if isPodsKind(kind) {
		pods, err := c.Pods(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, p := range pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if namespace != "" {
			return unknownName("pod", namespace+"/"+name, names)
		}
		return unknownName("pod", name, names)
	}
	return checkObject(ctx, c, kind, namespace, name)
}

// ambiguousName is the error for a name several namespaces hold, as the namespaces to
// choose from with -n.
func ambiguousName(kind, name string, objs []api.KubeObject) error {
	var nss []string
	for _, o := range objs {
		nss = append(nss, o.Namespace)
	}
	return fmt.Errorf("%s %q is in namespaces %s: choose one with -n", strings.ToLower(objs[0].Kind), name, strings.Join(nss, ", "))
}
