package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/web"
)

func newStatusCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List running labs, or show one lab's pods and their sidecars' request counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			names, err := lab.Known(g.runRoot)
			if err != nil {
				return err
			}
			if g.name == "" && len(names) > 1 {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "LAB\tSTATE\tPODS\tSCENARIO")
				for _, n := range names {
					state, pods, scenario := "stopped (run meshlab clean)", 0, ""
					if r, err := lab.ReadRecord(lab.PathsFor(g.runRoot, n)); err == nil {
						pods, scenario = len(r.Pods), r.Scenario
						if lab.Running(lab.PathsFor(g.runRoot, n)) {
							state = "running"
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", n, state, pods, scenario)
				}
				return tw.Flush()
			}
			name, err := g.labName()
			if errors.Is(err, lab.ErrNoLab) {
				fmt.Fprintln(out, "no lab is running (start one with: sudo meshlab up)")
				return nil
			}
			if err != nil {
				return err
			}
			p := lab.PathsFor(g.runRoot, name)
			if !lab.Running(p) {
				return fmt.Errorf("lab %s is not running; remove what it left with: sudo meshlab clean --name %s", name, name)
			}
			c := web.NewUnixClient(p.APISocket())
			defer c.Close()
			info, err := c.Lab(cmd.Context())
			if err != nil {
				return err
			}
			pods, err := c.Pods(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "lab %s (%s), pods %s, services %s, xDS on %s\n\n", info.Name, info.Scenario, info.PodCIDR, info.ServiceCIDR, info.XDSAddr)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "POD\tIP\tREADY\tEPOCH\tDATA PLANE\tRESTARTS\tRQ OUT\tRQ IN\tMESSAGE")
			for _, ps := range pods {
				epoch := "-"
				if ps.Epoch >= 0 {
					epoch = fmt.Sprint(ps.Epoch)
				}
				dp := ps.DataPlane
				if !ps.Sidecar {
					dp = "(no sidecar)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%d\t%d\t%d\t%s\n", ps.Name, ps.IP, ps.Ready, epoch, dp, ps.Restarts, ps.RequestsOut, ps.RequestsIn, ps.Message)
			}
			return tw.Flush()
		},
	}
}
