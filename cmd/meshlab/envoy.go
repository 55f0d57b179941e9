package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/agent"
)

// newEnvoyCmd returns `meshlab envoy install [version]`.
func newEnvoyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envoy",
		Short: "Install real Envoy for the sidecars (with func-e)",
	}
	var o agent.InstallOptions
	install := &cobra.Command{
		Use:   "install [VERSION]",
		Short: "Download an Envoy release with func-e; agents then run it instead of meshlab proxy",
		Long: `Downloads an Envoy release with func-e's Go API into func-e's home ($FUNC_E_HOME, else
~/.func-e), where the agents find it (after --proxy-path, $MESHLAB_ENVOY and envoy on PATH).
VERSION is like 1.36.2 or 1.36; without it, func-e's latest.
The proxy runs as uid 1337: the binary and every directory above it must be readable and
executable by that uid (a home under /root is not), or use --home.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Version = args[0]
			}
			o.Out = cmd.ErrOrStderr()
			path, err := agent.InstallEnvoy(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			if os.Getenv(agent.EnvoyEnv) != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: $%s is set and takes precedence over this install\n", agent.EnvoyEnv)
			}
			return nil
		},
	}
	install.Flags().StringVar(&o.Home, "home", "", "func-e home to install into (default $FUNC_E_HOME, else ~/.func-e)")
	install.Flags().StringVar(&o.VersionsURL, "versions-url", "", "func-e's envoy-versions.json (default func-e's)")
	cmd.AddCommand(install)
	return cmd
}
