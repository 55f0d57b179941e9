package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

func newDownCmd(g *globalFlags) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a lab and remove everything it created",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot("meshlab down"); err != nil {
				return err
			}
			name, err := g.labName()
			if err != nil {
				return err
			}
			if err := lab.Down(g.runRoot, name, timeout, g.logger()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s is down\n", name)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to let the lab stop by itself before removing it by force")
	return cmd
}

func newCleanCmd(g *globalFlags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove everything a lab left behind (after a crash or SIGKILL)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot("meshlab clean"); err != nil {
				return err
			}
			names := []string{g.name}
			if all {
				known, err := lab.Known(g.runRoot)
				if err != nil {
					return err
				}
				names = known
			} else if g.name == "" {
				n, err := g.labName()
				if err != nil {
					return err
				}
				names = []string{n}
			}
			for _, n := range names {
				if err := lab.Clean(g.runRoot, n, g.logger()); err != nil {
					return fmt.Errorf("clean lab %s: %w", n, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "lab %s: cleaned\n", n)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "clean every lab under the run root")
	return cmd
}
