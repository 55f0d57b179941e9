package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
)

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
			if g.name == "" {
				labs, err := lab.Summaries(g.runRoot)
				if err != nil {
					return err
				}
				if len(labs) > 1 {
					return printOutput(out, output, labs, func(w io.Writer) error { return printLabSummaries(w, labs) })
				}
			}
			if _, err := g.labName(); errors.Is(err, lab.ErrNoLab) {
				fmt.Fprintln(out, "no lab is running (start one with: sudo meshlab up)")
				return nil
			} else if err != nil {
				return err
			}
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (labStatus, error) {
				info, err := c.Lab(ctx)
				if err != nil {
					return labStatus{}, err
				}
				pods, err := c.Pods(ctx)
				return labStatus{Lab: info, Pods: nonNil(pods)}, err
			}, printLabStatus)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func printLabSummaries(w io.Writer, labs []lab.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LAB\tSTATE\tPODS\tSCENARIO")
	for _, s := range labs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Name, s.State, s.Pods, s.Scenario)
	}
	return tw.Flush()
}

func printLabStatus(w io.Writer, st labStatus) error {
	info := st.Lab
	xdsOn := "its unix socket"
	if info.XDSAddr != "" {
		xdsOn = info.XDSAddr + " (a pod's token or certificate required)"
	}
	fmt.Fprintf(w, "lab %s (%s), pods %s, services %s, xDS on %s\n", info.Name, info.Scenario, info.PodCIDR, info.ServiceCIDR, xdsOn)
	if info.ControlPlane == "istiod" {
		state := "running"
		switch {
		case info.ControlPlaneError != "":
			state = "EXITED: " + info.ControlPlaneError + "; the proxies keep their last config"
		case info.ControlPlaneRefused != "":
			state = "running, REFUSED the lab's last config: " + info.ControlPlaneRefused + "; istiod and the proxies keep the config it last took"
		}
		fmt.Fprintf(w, "control plane: istiod %s, %s\n", info.ControlPlaneVersion, state)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tIP\tREADY\tEPOCH\tDATA PLANE\tRESTARTS\tRQ OUT\tRQ IN\tMESSAGE")
	for _, ps := range st.Pods {
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
}
