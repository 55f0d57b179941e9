package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
)

// kubectl get's several names: `get KIND NAME NAME...` and `get KIND/NAME KIND/NAME...`
// (kubectl's ResourceTypeOrNameArgs). The objects found are printed as get prints them,
// a table once per kind; each name not found is kubectl's NotFound line on stderr, and
// get then exits 1, as kubectl's aggregate error does.

// getTarget is one KIND [NAME] of get's arguments.
type getTarget struct {
	kind string // as typed: "svc", "gatewayclass"
	name string // "" for every object of the kind
}

// readGetArgs reads get's arguments as kubectl does: KIND, KIND NAME..., or
// KIND/NAME... (not mixed).
func readGetArgs(args []string) ([]getTarget, error) {
	if _, _, slash := strings.Cut(args[0], "/"); !slash {
		if len(args) == 1 {
			return []getTarget{{kind: args[0]}}, nil
		}
		out := make([]getTarget, 0, len(args)-1)
		for _, n := range args[1:] {
			if strings.Contains(n, "/") {
				return nil, errors.New("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'meshlab get resource/<resource_name>' instead of 'meshlab get resource resource/<resource_name>'")
			}
			out = append(out, getTarget{kind: args[0], name: n})
		}
		return out, nil
	}
	out := make([]getTarget, 0, len(args))
	for _, a := range args {
		k, n, ok := strings.Cut(a, "/")
		if !ok || k == "" || n == "" || strings.Contains(n, "/") {
			return nil, fmt.Errorf("arguments in resource/name form must have a single resource and name: %q", a)
		}
		out = append(out, getTarget{kind: k, name: n})
	}
	return out, nil
}

// runGetMany is get of several names: each kind's objects found, in the order named,
// then the NotFound of those that are not, joined as the error get exits with.
func runGetMany(ctx context.Context, c *api.Client, cfg *getConfig, form getOutput, targets []getTarget, out io.Writer) error {
	namespace := cfg.namespace
	var missing []error
	var found []json.RawMessage // -o json|yaml: the objects found, printed as one List
	printed := false
	for _, group := range groupGetTargets(targets) {
		cfg.namespace = namespace // runGetOne settles it per kind (cluster-scoped: none)
		names := make([]string, len(group))
		for i, t := range group {
			names[i] = t.name
		}
		var buf strings.Builder
		var err error
		switch {
		case cfg.textOutput() && !form.isJSONPath:
			err = getTableOfNames(ctx, c, cfg, group[0].kind, names, &buf, &missing)
		case cfg.output == "json" || cfg.output == "yaml" || form.columns != nil:
			var objs []json.RawMessage
			objs, err = getObjectsOfNames(ctx, c, cfg, form, group[0].kind, names, &missing)
			found = append(found, objs...)
		default:
			for _, n := range names {
				if e := runGetOne(ctx, c, cfg, form, group[0].kind, n, &buf); e != nil {
					if !isNotFound(e) {
						return e
					}
					missing = append(missing, e)
				}
			}
		}
		if err != nil {
			return err
		}
		if buf.Len() == 0 {
			continue
		}
		if printed && cfg.textOutput() && !form.isJSONPath {
			fmt.Fprintln(out) // kubectl's blank line between kinds' tables
		}
		printed = true
		if _, err := io.WriteString(out, buf.String()); err != nil {
			return err
		}
	}
	cfg.namespace = namespace
	switch {
	case form.columns != nil:
		// kubectl prints what several names found as one table of the columns.
		if err := printCustomColumns(out, form.columns, found); err != nil {
			return err
		}
	case cfg.output == "json" || cfg.output == "yaml":
		// kubectl prints what several names found as one List, whatever their kinds.
		if err := printKube(out, cfg.output, found, false); err != nil {
			return err
		}
	}
	return errors.Join(missing...)
}

// getObjectsOfNames returns, in get's json form, each object of kindArg named names,
// adding the NotFound of each name the lab does not hold to missing.
func getObjectsOfNames(ctx context.Context, c *api.Client, cfg *getConfig, form getOutput, kindArg string, names []string, missing *[]error) ([]json.RawMessage, error) {
	one := *cfg
	one.output = "json"
	form.columns = nil // each object as -o json prints it
	var objs []json.RawMessage
	for _, n := range names {
		var buf bytes.Buffer
		if err := runGetOne(ctx, c, &one, form, kindArg, n, &buf); err != nil {
			if !isNotFound(err) {
				return nil, err
			}
			*missing = append(*missing, err)
			continue
		}
		objs = append(objs, json.RawMessage(bytes.Clone(buf.Bytes())))
	}
	return objs, nil
}

// groupGetTargets groups targets by kind, in the order each kind is first named.
func groupGetTargets(targets []getTarget) [][]getTarget {
	var kinds []string
	by := map[string][]getTarget{}
	for _, t := range targets {
		if _, ok := by[t.kind]; !ok {
			kinds = append(kinds, t.kind)
		}
		by[t.kind] = append(by[t.kind], t)
	}
	out := make([][]getTarget, len(kinds))
	for i, k := range kinds {
		out[i] = by[k]
	}
	return out
}

// getTableOfNames prints the objects of kindArg named names as one kubectl table, adding
// the NotFound of each name the lab does not hold to missing.
func getTableOfNames(ctx context.Context, c *api.Client, cfg *getConfig, kindArg string, names []string, out io.Writer, missing *[]error) error {
	switch {
	case cfg.all:
		cfg.namespace = ""
	case cfg.namespace == "":
		cfg.namespace = "default"
	}
	var kind api.Kind
	switch {
	case isPodsKind(kindArg):
		kind = api.Kind{Kind: "Pod", Names: []string{"pod", "pods", "po"}}
	case kindArg == "all" || isCRDKind(kindArg) || isIstioOperatorKind(kindArg):
		return fmt.Errorf("get %s takes one name at a time", kindArg)
	default:
		kinds, err := c.Kinds(ctx)
		if err != nil {
			return err
		}
		k, ok := kinds.Lookup(kindArg)
		if !ok {
			return fmt.Errorf("the server doesn't have a resource type %q (meshlab has pods, %s)", kindArg, strings.Join(kinds.KindNames(), ", "))
		}
		kind = k
		if clusterScoped(k) {
			cfg.namespace = ""
		}
	}
	objs, err := c.KubeObjects(ctx, kind.Kind, cfg.namespace, "", cfg.selector)
	if err != nil {
		return err
	}
	found := map[string]bool{}
	for _, o := range objs {
		found[o.Name] = true
	}
	var shown []string
	for _, n := range names {
		if !found[n] {
			*missing = append(*missing, notFound(kind, n))
			continue
		}
		if !slices.Contains(shown, n) {
			shown = append(shown, n)
		}
	}
	if len(shown) == 0 {
		return nil
	}
	if kind.Kind == "Pod" {
		return getPodsWhere(ctx, c, cfg, "", out, func(p api.PodStatus) bool { return slices.Contains(shown, p.Name) })
	}
	var rows []api.KubeObject
	for _, n := range shown {
		for _, o := range objs {
			if o.Name == n {
				rows = append(rows, o)
			}
		}
	}
	form := kubeTableForm{withNamespace: cfg.namespace == "" && !clusterScoped(kind), labelCols: cfg.labelCols}
	return printKubeTable(out, kind, rows, form, time.Now())
}

// isNotFound reports whether err is kubectl's NotFound for a name (notFound), with or
// without the names the lab holds after it.
func isNotFound(err error) bool {
	var nf *notFoundError
	return errors.As(err, &nf)
}
