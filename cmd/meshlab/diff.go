package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// againstMeshlab is diff's name of meshlab's generator's config (the lab's
// againstMeshlab).
const againstMeshlab = "meshlab"

// newDiffCmd returns `meshlab diff POD V1 V2`: a semantic diff of two config versions of
// a pod's proxy (see `meshlab history POD`).
func newDiffCmd(g *globalFlags) *cobra.Command {
	var output, against string
	cmd := &cobra.Command{
		Use:   "diff POD V1 V2 | diff POD [V] --against=meshlab | diff POD --against=cluster[/NAMESPACE/POD]",
		Short: "Show what changed between two config versions of a pod's proxy, by type, resource and field",
		Long: `Compares two config versions the control plane keeps of the pod's proxy (meshlab history POD):
per xDS type, resources added (+), removed (-) and changed (~), and for each changed resource
its changed fields (protojson paths; list elements with a name are addressed by it) with
old -> new values.

With --against=meshlab, on a lab whose control plane is istiod (up --control-plane=istiod):
compares what istiod sent the pod's proxy (version V, default its latest) with what
meshlab's own generator makes for the same pod from the lab's current objects. + is a
resource only meshlab makes, - one only istiod sent, ~ one both have, with istiod's value
-> meshlab's.

With --against=cluster, on a lab made from a bug report (up --from-bug-report): compares
the cluster's config of the pod, its proxy's config dump in the report, with the lab
proxy's own config dump: the dynamic listeners, routes, clusters and endpoints (not the
bootstrap's static ones, nor certificates). The report's pod is the one of the same
name, else the first of the pod's workload; --against=cluster/NAMESPACE/POD names it.
- is a resource only the cluster's proxy had, + one only the lab's has, ~ one both have,
with the cluster's value -> the lab's.`,
		Example: `  meshlab diff frontend-v1 v1 v2
  meshlab diff frontend-v1 --against=meshlab
  meshlab diff deploy/fortio-deploy.shop --against=cluster`,
		Args: func(cmd *cobra.Command, args []string) error {
			if against == againstCluster || strings.HasPrefix(against, againstCluster+"/") {
				return cobra.ExactArgs(1)(cmd, args)
			}
			if against != "" {
				return cobra.RangeArgs(1, 2)(cmd, args)
			}
			return cobra.ExactArgs(3)(cmd, args)
		},
		ValidArgsFunction: completeArgs(false, labPods(g, true), labVersions(g), labVersions(g)),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if choice, ok := strings.CutPrefix(against, againstCluster); ok && (choice == "" || choice[0] == '/') {
				if err := checkOutput(output); err != nil {
					return err
				}
				d, err := clusterDiff(cmd.Context(), g, args[0], strings.TrimPrefix(choice, "/"))
				if err != nil {
					return err
				}
				return printOutput(cmd.OutOrStdout(), output, d, func(w io.Writer) error { return printDiff(w, d) })
			}
			from, to := "", ""
			switch {
			case against == "" && len(args) == 3:
				from, to = args[1], args[2]
			case against != againstMeshlab:
				return fmt.Errorf("--against %q: compare with %s (meshlab's generator) or %s (a bug report's dump)", against, againstMeshlab, againstCluster)
			default:
				to = againstMeshlab
				if len(args) == 2 {
					from = args[1]
				}
			}
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.ConfigDiff, error) {
				return c.PodDiff(ctx, args[0], from, to)
			}, printDiff)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&against, "against", "", "meshlab: compare istiod's config of the pod with meshlab's own generator's (up --control-plane=istiod); cluster[/NAMESPACE/POD]: compare the bug report's dump of the pod with the lab proxy's (up --from-bug-report)")
	return cmd
}

// printDiff writes d as text.
func printDiff(w io.Writer, d api.ConfigDiff) error {
	fmt.Fprintf(w, "pod %s: %s -> %s\n", d.Pod, d.From, d.To)
	if len(d.Types) == 0 {
		_, err := fmt.Fprintln(w, "no difference")
		return err
	}
	for _, t := range d.Types {
		fmt.Fprintln(w, t.Type)
		for _, n := range t.Added {
			fmt.Fprintf(w, "  + %s\n", n)
		}
		for _, n := range t.Removed {
			fmt.Fprintf(w, "  - %s\n", n)
		}
		for _, rc := range t.Changed {
			fmt.Fprintf(w, "  ~ %s\n", rc.Name)
			for _, f := range rc.Fields {
				fmt.Fprintf(w, "      %s: %s -> %s\n", f.Path, orAbsent(f.Old), orAbsent(f.New))
			}
		}
	}
	return nil
}

func orAbsent(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
