package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
)

// getConfig is what `meshlab get` reads.
type getConfig struct {
	output    string // "", "yaml", "json" or a jsonpath form (jsonpath.go)
	namespace string // "" for every namespace
	all       bool   // -A: every namespace, as kubectl's --all-namespaces (wins over -n)
	selector  string // -l: kubectl's label selector, "" for all
}

func newGetCmd(g *globalFlags) *cobra.Command {
	cfg := &getConfig{}
	cmd := &cobra.Command{
		Use:   "get KIND|all [NAME]",
		Short: "List the objects of a running lab (pods, vs, dr, se, svc, workload, meshconfig, all)",
		Example: `  meshlab get pods -n foo
  meshlab get pod -l app=curl -o jsonpath={.items..metadata.name}
  meshlab get -n istio-system service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}'
  meshlab get -n istio-system service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}'
  meshlab get gtw httpbin-gateway -o jsonpath='{.status.addresses[0].value}'`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeArgs(false, labKinds(g, "pods", "all"), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			tmpl, asJSON, isJSONPath, err := jsonpathOutput(cfg.output)
			if err != nil {
				return err
			}
			if !isJSONPath {
				if err := checkOutput(cfg.output); err != nil {
					return err
				}
			}
			if cfg.all {
				cfg.namespace = ""
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if isJSONPath {
				return getJSONPath(cmd.Context(), c, cfg, args[0], name, tmpl, asJSON, cmd.OutOrStdout())
			}
			if cfg.selector != "" {
				return getSelected(cmd.Context(), c, cfg, args[0], name, cmd.OutOrStdout())
			}
			if isPodsKind(args[0]) {
				return getPods(cmd.Context(), c, cfg, name, cmd.OutOrStdout())
			}
			if args[0] != "all" {
				kinds, err := c.Kinds(cmd.Context())
				if err != nil {
					return err
				}
				if _, ok := kinds.Lookup(args[0]); !ok {
					return fmt.Errorf("unknown kind %q: meshlab has pods, %s (or all)", args[0], strings.Join(kinds.KindNames(), ", "))
				}
			}
			objs, err := c.Objects(cmd.Context(), args[0], cfg.namespace, name)
			if err != nil {
				return err
			}
			if name != "" && len(objs) == 0 {
				return checkObject(cmd.Context(), c, args[0], cfg.namespace, name)
			}
			return printObjects(cmd.Context(), c, cfg, args[0], objs, cmd.OutOrStdout())
		},
	}
	addOutputFlag(cmd, &cfg.output)
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "", "only this namespace (default: all)")
	cmd.Flags().BoolVarP(&cfg.all, "all-namespaces", "A", false, "every namespace, as kubectl's -A (the default without -n; wins over -n)")
	cmd.Flags().StringVarP(&cfg.selector, "selector", "l", "", "label selector, as kubectl's (app=curl, 'app in (a,b)', !canary)")
	cmd.Flags().Lookup("output").Usage = "output format: json, yaml, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE or jsonpath-file=FILE (default: text)"
	return cmd
}

// printObjects prints objects as written, in get's json, yaml or text form.
func printObjects(ctx context.Context, c *api.Client, cfg *getConfig, kind string, objs []api.ConfigObject, out io.Writer) error {
	switch cfg.output {
	case "json":
		list := make([]json.RawMessage, len(objs))
		for i, o := range objs {
			list[i] = o.Object
		}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		if len(list) == 1 {
			b, _ = json.MarshalIndent(list[0], "", "  ")
		}
		fmt.Fprintln(out, string(b))
	case "yaml":
		for i, o := range objs {
			y, err := yaml.JSONToYAML(o.Object)
			if err != nil {
				return fmt.Errorf("render %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
			}
			if i > 0 {
				fmt.Fprintln(out, "---")
			}
			fmt.Fprint(out, string(y))
		}
	default:
		k, ok, err := lookupKind(ctx, c, kind)
		if err != nil {
			return err
		}
		if ok && k.Kind == api.GatewayAPIGatewayKind {
			return printGatewayAPIGateways(ctx, c, objs, out)
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tFILE")
		for _, o := range objs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Kind, o.Namespace, o.Name, o.File)
		}
		return tw.Flush()
	}
	return nil
}
