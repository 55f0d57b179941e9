package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/config"
)

// getConfig is what `meshlab get` reads.
type getConfig struct {
	output    string // "", "yaml" or "json"
	namespace string // "" for every namespace
	all       bool   // -A: every namespace, as kubectl's --all-namespaces (wins over -n)
}

func newGetCmd(g *globalFlags) *cobra.Command {
	cfg := &getConfig{}
	cmd := &cobra.Command{
		Use:               "get KIND|all [NAME]",
		Short:             "List the objects of a running lab (pods, vs, dr, se, svc, workload, meshconfig, all)",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeArgs(false, fixedNames(append(kindNames, "pods", "all")...), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cfg.output); err != nil {
				return err
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
			if isPodsKind(args[0]) {
				return getPods(cmd.Context(), c, cfg, name, cmd.OutOrStdout())
			}
			if _, ok := config.CanonicalKind(args[0]); !ok && args[0] != "all" {
				return fmt.Errorf("unknown kind %q: meshlab has pods, %s (or all)", args[0], strings.Join(config.Kinds(), ", "))
			}
			objs, err := c.Objects(cmd.Context(), args[0], cfg.namespace, name)
			if err != nil {
				return err
			}
			if name != "" && len(objs) == 0 {
				return checkObject(cmd.Context(), c, args[0], cfg.namespace, name)
			}
			out := cmd.OutOrStdout()
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
				if k, _ := config.CanonicalKind(args[0]); k == config.GatewayAPIGatewayKind {
					return printGatewayAPIGateways(cmd.Context(), g, c, objs, out)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tFILE")
				for _, o := range objs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Kind, o.Namespace, o.Name, o.File)
				}
				return tw.Flush()
			}
			return nil
		},
	}
	addOutputFlag(cmd, &cfg.output)
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "", "only this namespace (default: all)")
	cmd.Flags().BoolVarP(&cfg.all, "all-namespaces", "A", false, "every namespace, as kubectl's -A (the default without -n; wins over -n)")
	return cmd
}
