package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
)

// labSummary is one lab in `meshlab status -o json|yaml` when several labs exist.
type labSummary struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Pods     int    `json:"pods"`
	Scenario string `json:"scenario"`
}

// labStatus is `meshlab status -o json|yaml` for one lab.
type labStatus struct {
	Lab  api.LabInfo     `json:"lab"`
	Pods []api.PodStatus `json:"pods"`
}

func newStatusCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List running labs, or show one lab's pods and their sidecars' request counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			names, err := lab.Known(g.runRoot)
			if err != nil {
				return err
			}
			if g.name == "" && len(names) > 1 {
				var labs []labSummary
				for _, n := range names {
					s := labSummary{Name: n, State: "stopped (run meshlab clean)"}
					if r, err := lab.ReadRecord(lab.PathsFor(g.runRoot, n)); err == nil {
						s.Pods, s.Scenario = len(r.Pods), r.Scenario
						if lab.Running(lab.PathsFor(g.runRoot, n)) {
							s.State = "running"
						}
					}
					labs = append(labs, s)
				}
				return printOutput(out, output, labs, func(w io.Writer) error {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "LAB\tSTATE\tPODS\tSCENARIO")
					for _, s := range labs {
						fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Name, s.State, s.Pods, s.Scenario)
					}
					return tw.Flush()
				})
			}
			_, err = g.labName()
			if errors.Is(err, lab.ErrNoLab) {
				fmt.Fprintln(out, "no lab is running (start one with: sudo meshlab up)")
				return nil
			}
			if err != nil {
				return err
			}
			name, err := g.existingLab()
			if err != nil {
				return err
			}
			c := api.NewUnixClient(lab.PathsFor(g.runRoot, name).APISocket())
			defer c.Close()
			info, err := c.Lab(cmd.Context())
			if err != nil {
				return err
			}
			pods, err := c.Pods(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" || output == "yaml" {
				return printOutput(out, output, labStatus{Lab: info, Pods: nonNil(pods)}, nil)
			}
			xdsOn := "its unix socket"
			if info.XDSAddr != "" {
				xdsOn = info.XDSAddr + " (a pod's token or certificate required)"
			}
			fmt.Fprintf(out, "lab %s (%s), pods %s, services %s, xDS on %s\n\n", info.Name, info.Scenario, info.PodCIDR, info.ServiceCIDR, xdsOn)
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
	addOutputFlag(cmd, &output)
	return cmd
}
