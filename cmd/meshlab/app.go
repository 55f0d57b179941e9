package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/demoapp"
	"github.com/meshlab/meshlab/demoapp/fortio"
	"github.com/meshlab/meshlab/demoapp/grpcecho"  // also registers the grpc-echo persona with demoapp
	_ "github.com/meshlab/meshlab/demoapp/otelcol" // registers the opentelemetry-collector persona with demoapp
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
			if cfg.Persona == demoapp.PersonaFortio {
				return fortio.Serve(cmd.Context(), cfg.Ports, logger)
			}
			return demoapp.Run(cmd.Context(), cfg, logger)
		},
	}
	cfg.AddFlags(cmd.Flags())
	cmd.AddCommand(newAppGRPCCallCmd())
	return cmd
}

// newAppGRPCCallCmd is `meshlab app grpc-call TARGET`: the grpc-echo persona as a
// proxyless client, run in a pod with `meshlab exec`.
func newAppGRPCCallCmd() *cobra.Command {
	var (
		n         int
		plaintext bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:     "grpc-call TARGET",
		Short:   "call a grpc-echo server as a proxyless gRPC client (xds:///host:port) or a plaintext one (--plaintext host:port)",
		Example: "  sudo meshlab exec deploy/grpc-client -- meshlab app grpc-call -n 10 xds:///echo.default.svc.cluster.local:7070",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return grpcecho.CallMain(ctx, cmd.OutOrStdout(), args[0], n, plaintext)
		},
	}
	cmd.Flags().IntVarP(&n, "calls", "n", 1, "number of calls on one channel")
	cmd.Flags().BoolVar(&plaintext, "plaintext", false, "plaintext, without xDS (an app outside the mesh)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}
