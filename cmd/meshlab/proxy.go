package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"slices"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/proxy"
)

// errProxyExit carries a non-zero exit status of `meshlab proxy`; the message was already
// printed in Envoy's shape.
var errProxyExit = errors.New("meshlab proxy exited with status 1")

// proxyHelpPreface comes before Envoy's usage in `meshlab proxy --help`: the flags are
// Envoy's, and the lab verb hides behind them otherwise.
const proxyHelpPreface = `meshlab proxy is the built-in Envoy-compatible data plane: it takes Envoy's flags (below).

To hot-restart a pod's sidecar in a running lab (a new epoch, as a settings change makes):
  sudo meshlab proxy restart POD [--lab NAME] [--no-wait] [--timeout D]
See: meshlab proxy restart --help

`

// newProxyCmd returns `meshlab proxy`, the built-in Envoy-compatible data plane. It
// parses Envoy's own flags (so cobra's flag parsing is off) and exits like Envoy: 0 on
// SIGTERM/SIGINT, /quitquitquit or a valid --mode validate, 1 on a bad command line or
// configuration. `meshlab proxy restart POD` (Envoy takes no positional arguments) is
// the lab verb in proxyrestart.go.
func newProxyCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:                "proxy",
		Short:              "Hot-restart a pod's sidecar (proxy restart POD); otherwise the built-in Envoy-compatible data plane",
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if rest, ok := restartArgs(args); ok {
				labFlags(g, rest)
				return completePods(g, true)(cmd, positional(rest), "")
			}
			if len(positional(args)) == 0 {
				return []cobra.Completion{"restart"}, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveDefault
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if rest, ok := restartArgs(args); ok {
				return runProxyRestart(cmd, g, rest)
			}
			if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" }) {
				fmt.Fprint(cmd.OutOrStdout(), proxyHelpPreface)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if code := proxy.Main(ctx, args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				return errProxyExit
			}
			return nil
		},
	}
}
