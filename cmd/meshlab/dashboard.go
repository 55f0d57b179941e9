package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

func newDashboardCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "dashboard",
		Short: "Print the running lab's dashboard URL (with its login token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, err := g.labName()
			if err != nil {
				return err
			}
			p := lab.PathsFor(g.runRoot, name)
			if !lab.Running(p) {
				return fmt.Errorf("lab %s is not running", name)
			}
			u, err := lab.ReadDashboardURL(p)
			if err != nil {
				return fmt.Errorf("lab %s serves no dashboard (started with --listen \"\"?): %w", name, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), u)
			return nil
		},
	}
}
