package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/ztunnel"
)

// newZtunnelCmd is `meshlab ztunnel`, the node proxy of ambient mode the lab starts in
// ztunnel's own network namespace; like the real ztunnel it is configured by its
// environment (INPOD_UDS, XDS_ADDRESS, NODE_NAME, ...), not by flags.
func newZtunnelCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "ztunnel",
		Short:  "run the ambient node proxy (internal; started by the lab)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ztunnel.ConfigFromEnv(os.Environ())
			if err != nil {
				return err
			}
			return ztunnel.Run(cmd.Context(), cfg, ztunnel.Options{}, agentLogger(cmd))
		},
	}
}
