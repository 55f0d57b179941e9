package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// getConfig is what `meshlab get` reads.
type getConfig struct {
	output    string // "", "yaml", "json" or a jsonpath form (jsonpath.go)
	namespace string // "" for every namespace
	all       bool   // -A: every namespace, as kubectl's --all-namespaces (wins over -n)
	selector  string // -l: kubectl's label selector, "" for all
	errOut    io.Writer
	// typedNames prints pods as pod/NAME (kubectl get all).
	typedNames bool
	labelCols  labelColumns // -L and --show-labels: kubectl's label columns of a table
}

// textOutput reports whether -o asks for a table: kubectl's default or -o wide.
func (cfg *getConfig) textOutput() bool {
	return cfg.output == "" || cfg.output == "text" || cfg.output == "wide"
}

func newGetCmd(g *globalFlags) *cobra.Command {
	cfg := &getConfig{}
	cmd := &cobra.Command{
		Use:   "get KIND|all [NAME]",
		Short: "List the objects of a running lab as kubectl get does (pods, svc, deploy, gateway, vs, dr, se, all...)",
		Example: `  meshlab get pods -n foo
  meshlab get pod -l app=curl -o jsonpath={.items..metadata.name}
  meshlab get -n istio-system service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}'
  meshlab get -n istio-system service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}'
  meshlab get gtw httpbin-gateway -o jsonpath='{.status.addresses[0].value}'`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeArgs(false, labKinds(g, "pods", "all"), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			form, err := readGetOutput(cfg.output)
			if err != nil {
				return err
			}
			targets, err := readGetArgs(args)
			if err != nil {
				return err
			}
			cfg.errOut = cmd.ErrOrStderr()
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if len(targets) == 1 {
				return runGetOne(cmd.Context(), c, cfg, form, targets[0].kind, targets[0].name, cmd.OutOrStdout())
			}
			return runGetMany(cmd.Context(), c, cfg, form, targets, cmd.OutOrStdout())
		},
	}
	addOutputFlag(cmd, &cfg.output)
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "", "the namespace, as kubectl's (default: default)")
	cmd.Flags().BoolVarP(&cfg.all, "all-namespaces", "A", false, "every namespace, as kubectl's -A (wins over -n)")
	cmd.Flags().StringVarP(&cfg.selector, "selector", "l", "", "label selector, as kubectl's (app=curl, 'app in (a,b)', !canary)")
	addLabelFlags(cmd, &cfg.labelCols)
	cmd.Flags().Lookup("output").Usage = "output format: wide, json, yaml, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, jsonpath-file=FILE, custom-columns=HEADER:PATH,... or custom-columns-file=FILE (default: kubectl's table)"
	return cmd
}

// getOutput is get's -o read once: a jsonpath template, or a form checkOutput takes.
type getOutput struct {
	tmpl               string
	asJSON, isJSONPath bool
	columns            []customColumn // -o custom-columns[-file] (customcolumns.go)
}

func readGetOutput(output string) (getOutput, error) {
	if cols, ok, err := customColumnsOutput(output); ok {
		return getOutput{columns: cols}, err
	}
	tmpl, asJSON, isJSONPath, err := jsonpathOutput(output)
	if err != nil {
		return getOutput{}, err
	}
	if !isJSONPath && output != "wide" {
		if err := checkOutput(output); err != nil {
			return getOutput{}, err
		}
	}
	return getOutput{tmpl: tmpl, asJSON: asJSON, isJSONPath: isJSONPath}, nil
}

// runGetOne is get of one kind, and of one name unless name is "".
func runGetOne(ctx context.Context, c *api.Client, cfg *getConfig, form getOutput, kind, name string, out io.Writer) error {
	tmpl, asJSON, isJSONPath := form.tmpl, form.asJSON, form.isJSONPath
	args := []string{kind}
	if isCRDKind(args[0]) {
		return getCRDs(ctx, c, name, cfg.labelCols, out)
	}
	// kubectl's namespaces: -n's, else default, every one with -A; a
	// cluster-scoped kind has none.
	switch {
	case cfg.all:
		cfg.namespace = ""
	case cfg.namespace == "":
		cfg.namespace = "default"
	}
	if isIstioOperatorKind(args[0]) {
		return getIstioOperators(ctx, c, cfg, name, tmpl, asJSON, isJSONPath, out)
	}
	if args[0] != "all" && !isPodsKind(args[0]) {
		if k, ok, err := lookupKind(ctx, c, args[0]); err == nil && ok && clusterScoped(k) {
			cfg.namespace = ""
		}
	}
	if form.columns != nil {
		return getCustomColumns(ctx, c, cfg, args[0], name, form.columns, out)
	}
	if cfg.textOutput() && !isJSONPath {
		return getText(ctx, c, cfg, args[0], name, out)
	}
	if isJSONPath {
		return getJSONPath(ctx, c, cfg, args[0], name, tmpl, asJSON, out)
	}
	if cfg.selector != "" {
		return getSelected(ctx, c, cfg, args[0], name, out)
	}
	if isPodsKind(args[0]) {
		return getPods(ctx, c, cfg, name, out)
	}
	if args[0] != "all" {
		kinds, err := c.Kinds(ctx)
		if err != nil {
			return err
		}
		if _, ok := kinds.Lookup(args[0]); !ok {
			return fmt.Errorf("unknown kind %q: meshlab has pods, %s (or all)", args[0], strings.Join(kinds.KindNames(), ", "))
		}
	}
	if args[0] == "all" {
		return getAllObjects(ctx, c, cfg, out)
	}
	views, err := c.KubeObjects(ctx, args[0], cfg.namespace, name, "")
	if err != nil {
		return err
	}
	if name != "" && len(views) == 0 {
		return checkObject(ctx, c, args[0], cfg.namespace, name)
	}
	return printKubeObjects(cfg, views, name != "", out)
}

// allKinds are kubectl get all's kinds (its "all" category), in its order.
var allKinds = []string{"Service", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"}

// getAllObjects is get all -o json|yaml: the pods and the objects of allKinds as the
// lab's Kubernetes view holds them, one List.
func getAllObjects(ctx context.Context, c *api.Client, cfg *getConfig, out io.Writer) error {
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return err
	}
	var views []api.KubeObject
	for _, kn := range append([]string{"Pod"}, allKinds...) {
		if _, ok := kinds.Lookup(kn); !ok && kn != "Pod" {
			continue
		}
		objs, err := c.KubeObjects(ctx, kn, cfg.namespace, "", cfg.selector)
		if err != nil {
			return err
		}
		views = append(views, objs...)
	}
	return printKubeObjects(cfg, views, false, out)
}

// printKubeObjects prints objects of the lab's Kubernetes view (the one place that
// makes the API server's object of every kind: lab/kubeview.go) in get's json or yaml
// form: the object when get named one (single), else kubectl's List of them
// (printKube).
func printKubeObjects(cfg *getConfig, objs []api.KubeObject, single bool, out io.Writer) error {
	raws := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		raws[i] = o.Object
	}
	return printKube(out, cfg.output, raws, single)
}

// getText prints kind (or all) as kubectl get's tables.
func getText(ctx context.Context, c *api.Client, cfg *getConfig, kindArg, name string, out io.Writer) error {
	if isPodsKind(kindArg) {
		if cfg.selector != "" {
			return getSelected(ctx, c, cfg, kindArg, name, out)
		}
		return getPods(ctx, c, cfg, name, out)
	}
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return err
	}
	if kindArg != "all" {
		k, ok := kinds.Lookup(kindArg)
		if !ok {
			return fmt.Errorf("the server doesn't have a resource type %q (meshlab has pods, %s)", kindArg, strings.Join(kinds.KindNames(), ", "))
		}
		return getTable(ctx, c, k, cfg, name, out)
	}
	// kubectl get all: pods, services and the workload kinds (its "all" category), as
	// sections named kind/name.
	now, printed := time.Now(), false
	section := func(k api.Kind) error {
		objs, err := c.KubeObjects(ctx, k.Kind, cfg.namespace, "", cfg.selector)
		if err != nil || len(objs) == 0 {
			return err
		}
		if printed {
			fmt.Fprintln(out)
		}
		printed = true
		return printKubeTable(out, k, objs, kubeTableForm{withNamespace: cfg.namespace == "" && !clusterScoped(k), typedNames: true, labelCols: cfg.labelCols}, now)
	}
	if err := getAllPods(ctx, c, cfg, out, &printed); err != nil {
		return err
	}
	for _, kn := range allKinds {
		if k, ok := kinds.Lookup(kn); ok {
			if err := section(k); err != nil {
				return err
			}
		}
	}
	if !printed {
		return noResources(cfg.namespace, cfg.errOut)
	}
	return nil
}

// getAllPods is get all's pods section: getPods' table with names as pod/NAME.
func getAllPods(ctx context.Context, c *api.Client, cfg *getConfig, out io.Writer, printed *bool) error {
	var buf strings.Builder
	all := *cfg
	all.errOut, all.typedNames = io.Discard, true
	if err := getPods(ctx, c, &all, "", &buf); err != nil || buf.Len() == 0 {
		return err
	}
	*printed = true
	_, err := io.WriteString(out, buf.String())
	return err
}
