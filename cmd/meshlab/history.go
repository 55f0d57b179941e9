package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// historyTypes are the xDS types shown, in istioctl's column order; a ztunnel's are
// ztunnelHistoryTypes.
var (
	historyTypes        = []string{"CDS", "LDS", "EDS", "RDS", "SDS"}
	ztunnelHistoryTypes = []string{"WDS", "WADS"}
)

// newHistoryCmd returns `meshlab history POD`: the config versions the control plane
// keeps of a pod's proxy (or of the lab's ztunnel, by its pod), with what triggered each
// and the proxy's answer per type.
func newHistoryCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "history POD",
		Short:             "List the config versions sent to a pod's proxy, what triggered each, and ACK/NACK per type",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(false, labPods(g, true)),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.PodHistory, error) {
				return c.PodHistory(ctx, args[0])
			}, printHistory)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printHistory writes one line per version: time, trigger, then per type the proxy's
// answer and the resource count ("ACK/6"), then one line per NACK with its error.
func printHistory(w io.Writer, h api.PodHistory) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	types := historyTypes
	if strings.HasPrefix(h.NodeID, "ztunnel~") {
		types = ztunnelHistoryTypes
	}
	fmt.Fprint(tw, "VERSION\tTIME")
	for _, t := range types {
		fmt.Fprint(tw, "\t"+t)
	}
	fmt.Fprintln(tw, "\tTRIGGER")
	var nacks []string
	for _, s := range h.Snapshots {
		fmt.Fprintf(tw, "%s\t%s", s.Version, s.Time.Format(time.TimeOnly))
		for _, typ := range types {
			t, ok := s.Types[typ]
			switch {
			case !ok:
				fmt.Fprint(tw, "\t-")
			case t.State == "":
				fmt.Fprintf(tw, "\tSENT/%d", t.Resources)
			default:
				fmt.Fprintf(tw, "\t%s/%d", t.State, t.Resources)
			}
			if t.State == "NACK" {
				nacks = append(nacks, fmt.Sprintf("NACK %s %s: %s", s.Version, typ, t.Error))
			}
		}
		fmt.Fprintf(tw, "\t%s\n", s.Trigger)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range nacks {
		fmt.Fprintln(w, n)
	}
	return nil
}
