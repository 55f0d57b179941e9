package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/demoapp"
)

// newAppCmd returns `meshlab app`, the built-in demo workload the lab starts in a pod
// whose Workload names no command. Its flags are demoapp.Args's.
func newAppCmd() *cobra.Command {
	var cfg demoapp.Config
	cmd := &cobra.Command{
		Use:    "app",
		Short:  "run the built-in demo workload (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "app", "pod", cfg.Pod)
			return demoapp.Run(cmd.Context(), cfg, logger)
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}
