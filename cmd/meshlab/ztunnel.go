package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/ztunnel"
)

// newZtunnelCmd is `meshlab ztunnel`, the node proxy of ambient mode the lab starts in
// ztunnel's own network namespace; like the real ztunnel it is configured by its
// environment (INPOD_UDS, XDS_ADDRESS, NODE_NAME, ...), not by flags. RUST_LOG's level
// (error, warn, info, debug, trace) is its log level, changed at runtime by the admin's
// /logging.
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
			level := new(slog.LevelVar)
			switch strings.ToLower(os.Getenv("RUST_LOG")) {
			case "error":
				level.Set(slog.LevelError)
			case "warn":
				level.Set(slog.LevelWarn)
			case "debug", "trace":
				level.Set(slog.LevelDebug)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return ztunnel.Run(cmd.Context(), cfg, ztunnel.Options{Level: level, AccessLog: os.Stderr}, log)
		},
	}
}
