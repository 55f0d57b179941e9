package main

import (
	"context"
	"fmt"
	"io"

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
		Use:   "diff POD V1 V2 | diff POD [V] --against=meshlab",
		Short: "Show what changed between two config versions of a pod's proxy, by type, resource and field",
		Long: `Compares two config versions the control plane keeps of the pod's proxy (meshlab history POD):
per xDS type, resources added (+), removed (-) and changed (~), and for each changed resource
its changed fields (protojson paths; list elements with a name are addressed by it) with
old -> new values.

With --against=meshlab, on a lab whose control plane is istiod (up --control-plane=istiod):
compares what istiod sent the pod's proxy (version V, default its latest) with what
meshlab's own generator makes for the same pod from the lab's current objects. + is a
resource only meshlab makes, - one only istiod sent, ~ one both have, with istiod's value
-> meshlab's.`,
		Example: `  meshlab diff frontend-v1 v1 v2
  meshlab diff frontend-v1 --against=meshlab`,
		Args: func(cmd *cobra.Command, args []string) error {
			if against != "" {
				return cobra.RangeArgs(1, 2)(cmd, args)
			}
			return cobra.ExactArgs(3)(cmd, args)
		},
		ValidArgsFunction: completeArgs(false, labPods(g, true), labVersions(g), labVersions(g)),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			from, to := "", ""
			switch {
			case against == "" && len(args) == 3:
				from, to = args[1], args[2]
			case against != againstMeshlab:
				return fmt.Errorf("--against %q: the only generator to compare with is %s", against, againstMeshlab)
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
	cmd.Flags().StringVar(&against, "against", "", "compare istiod's config of the pod with meshlab's own generator's (meshlab; with up --control-plane=istiod)")
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
