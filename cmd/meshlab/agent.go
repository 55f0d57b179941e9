package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/agent"
)

// newAgentCmd is `meshlab agent`, the per-pod pilot-agent the lab process starts inside
// each pod's network namespace; its flags are agent.Args of an agent.Config.
func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent [proxy sidecar|router|waypoint]",
		Short:  "run the pod agent (internal; started by the lab)",
		Hidden: true,
		Args: func(_ *cobra.Command, args []string) error {
			_, err := agent.ParseProxyArgs(args)
			return err
		},
	}
	config := agent.BindFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := config()
		if err != nil {
			return err
		}
		if cfg.ProxyType, err = agent.ParseProxyArgs(args); err != nil {
			return err
		}
		return agent.Run(cmd.Context(), cfg, agentLogger(cmd))
	}
	return cmd
}

// agentLogger writes text logs to stderr (the lab appends them to agent.log), at the
// root's --log-level when there is one, else info.
func agentLogger(cmd *cobra.Command) *slog.Logger {
	lvl := slog.LevelInfo
	if f := cmd.Flags().Lookup("log-level"); f != nil {
		var l slog.Level
		if l.UnmarshalText([]byte(strings.ToUpper(f.Value.String()))) == nil {
			lvl = l
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}
