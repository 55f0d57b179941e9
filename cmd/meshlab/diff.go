package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newDiffCmd returns `meshlab diff POD V1 V2`: a semantic diff of two config versions of
// a pod's proxy (see `meshlab history POD`).
func newDiffCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "diff POD V1 V2",
		Short: "Show what changed between two config versions of a pod's proxy, by type, resource and field",
		Long: `Compares two config versions the control plane keeps of the pod's proxy (meshlab history POD):
per xDS type, resources added (+), removed (-) and changed (~), and for each changed resource
its changed fields (protojson paths; list elements with a name are addressed by it) with
old -> new values.`,
		Args:              cobra.ExactArgs(3),
		ValidArgsFunction: completeArgs(false, labPods(g, true), labVersions(g), labVersions(g)),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.ConfigDiff, error) {
				return c.PodDiff(ctx, args[0], args[1], args[2])
			}, printDiff)
		},
	}
	addOutputFlag(cmd, &output)
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
