package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// proxyRestartFlags are the flags of `meshlab proxy restart`.
type proxyRestartFlags struct {
	noWait    bool
	timeout   time.Duration
	namespace string // -n
}

// newProxyRestartCmd returns `meshlab proxy restart POD`: a new proxy epoch (hot restart)
// in the pod, with the same settings. `meshlab proxy` itself is the data plane and parses
// Envoy's flags, so it hands "restart ..." to this command, which parses the lab flags
// (--lab, --name, --run-root) itself.
func newProxyRestartCmd(g *globalFlags) *cobra.Command {
	var f proxyRestartFlags
	cmd := &cobra.Command{
		Use:   "restart POD",
		Short: "Hot-restart a pod's sidecar: start epoch N+1 once epoch N is live, and wait until it is live",
		Long: `Starts a new epoch of the pod's sidecar proxy, as a proxy settings change would:
the agent starts epoch N+1 with --restart-epoch N+1 and the pod's --base-id once epoch N
is LIVE, the new epoch takes over the listeners and the old one drains and exits.
Prints the new epoch and the time until it was LIVE.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePods(g, true),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, key, err := g.podPathsIn(args[0], f.namespace, true)
			if err != nil {
				return err
			}
			args[0] = key // the pod's key names it to the lab even where its name repeats
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			r, err := c.RestartProxy(ctx, args[0], !f.noWait)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case r.Epoch < 0:
				return fmt.Errorf("pod %s: %s", r.Pod, r.Message)
			case f.noWait:
				fmt.Fprintf(out, "pod %s: proxy epoch %d started\n", r.Pod, r.Epoch)
			case r.Live:
				fmt.Fprintf(out, "pod %s: proxy epoch %d is live after %s\n", r.Pod, r.Epoch, r.Elapsed.Round(time.Millisecond))
			default:
				return fmt.Errorf("pod %s: proxy epoch %d: %s", r.Pod, r.Epoch, r.Message)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "the pod's namespace (needed only when its name is in several; NAME.NAMESPACE also works)")
	cmd.Flags().BoolVar(&f.noWait, "no-wait", false, "return once the new epoch is started, not once it is live")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (default: the lab's limit, 60s)")
	cmd.Flags().StringVar(&g.name, "lab", g.name, "the lab (default: the only lab you started)")
	cmd.Flags().StringVar(&g.name, "name", g.name, "the lab, as --lab (kept for compatibility)")
	cmd.Flags().StringVar(&g.runRoot, "run-root", g.runRoot, "where labs keep their run directories")
	return cmd
}

// runProxyRestart runs `meshlab proxy restart ...`; args start after "restart".
func runProxyRestart(cmd *cobra.Command, g *globalFlags, args []string) error {
	rc := newProxyRestartCmd(g)
	rc.Use = "meshlab proxy restart POD"
	rc.SetArgs(args)
	rc.SetOut(cmd.OutOrStdout())
	rc.SetErr(cmd.ErrOrStderr())
	return rc.ExecuteContext(cmd.Context())
}

// restartArgs reports whether the arguments of `meshlab proxy` are `restart ...`, after
// any lab flags typed before it (cobra hands `meshlab --name x proxy restart POD` to
// `proxy` whole, because proxy parses Envoy's flags itself), and returns the arguments
// for the restart command: those after "restart", then the leading lab flags.
func restartArgs(args []string) ([]string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "restart":
			return append(append([]string{}, args[i+1:]...), args[:i]...), true
		case a == "--lab" || a == "--name" || a == "--run-root":
			i++ // the flag's value
		case strings.HasPrefix(a, "--lab=") || strings.HasPrefix(a, "--name=") || strings.HasPrefix(a, "--run-root="):
		default:
			return nil, false
		}
	}
	return nil, false
}

// positional drops the lab flags (and their values) from args.
func positional(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--lab" || a == "--name" || a == "--run-root":
			i++
		case strings.HasPrefix(a, "--"):
		default:
			out = append(out, a)
		}
	}
	return out
}

// labFlags sets g's --name and --run-root from args, for `proxy`, whose flags cobra
// does not parse.
func labFlags(g *globalFlags, args []string) {
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case a == "--name" || a == "--lab":
			g.name = next
		case a == "--run-root":
			g.runRoot = next
		case strings.HasPrefix(a, "--name="):
			g.name = strings.TrimPrefix(a, "--name=")
		case strings.HasPrefix(a, "--lab="):
			g.name = strings.TrimPrefix(a, "--lab=")
		case strings.HasPrefix(a, "--run-root="):
			g.runRoot = strings.TrimPrefix(a, "--run-root=")
		}
	}
}
