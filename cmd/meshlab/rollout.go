package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newRolloutCmd is kubectl rollout, with the status form Istio's pages run after
// applying an addon or a Deployment (`kubectl rollout status deployment/prometheus -n
// istio-system`). restart is not there: refusals.go says why.
func newRolloutCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout status",
		Short: "Watch a Deployment's rollout, as kubectl rollout",
	}
	cmd.AddCommand(newRolloutStatusCmd(g))
	return cmd
}

// newRolloutStatusCmd is kubectl rollout status for Deployments: it waits until the
// Deployment's pods are available (its Available condition, as `wait
// --for=condition=available` reads it) and prints kubectl's line.
func newRolloutStatusCmd(g *globalFlags) *cobra.Command {
	var namespace string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status (deployment/NAME | deployment NAME)",
		Short: "Wait until a Deployment's pods are available, as kubectl rollout status",
		Example: `  meshlab rollout status deployment/prometheus -n istio-system
  meshlab rollout status deploy httpbin --timeout=60s`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, slash := strings.Cut(args[0], "/")
			switch {
			case slash && len(args) == 2, !slash && len(args) != 2:
				return fmt.Errorf("error: rollout status takes deployment/NAME or deployment NAME") //nolint:staticcheck // kubectl's text
			case !slash:
				name = args[1]
			}
			c, kinds, err := g.kindsClient(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			k, ok := kinds.Lookup(kind)
			if !ok || k.Kind != "Deployment" {
				return fmt.Errorf("error: rollout status: meshlab watches Deployments' rollouts, not %s (wait --for=condition=ready pod -l ... waits on pods)", kind) //nolint:staticcheck // kubectl's prefix
			}
			if namespace == "" {
				namespace = "default"
			}
			if timeout == 0 {
				timeout = -1 // kubectl's 0: no limit
			}
			cfg := &waitConfig{namespace: namespace, timeout: timeout, interval: 250 * time.Millisecond}
			cond, err := parseWaitFor("condition=available")
			if err != nil {
				return err
			}
			if err := runWait(cmd.Context(), c.KubeObjects, kinds, cfg, cond, []waitTarget{{kind: "Deployment", name: name}}, io.Discard); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deployment %q successfully rolled out\n", name)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the Deployment's namespace (default: default)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait (0: until it is done), as kubectl's")
	return cmd
}
