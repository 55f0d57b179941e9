package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// faultAddFlags are the flags of `meshlab fault add`.
type faultAddFlags struct {
	delay    time.Duration
	duration time.Duration
	offset   time.Duration
}

// newFaultCmd returns `meshlab fault add|list|clear`: faults in the mesh's own machinery.
func newFaultCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fault",
		Short: "Break the mesh's machinery on purpose: delay or hold xDS pushes, force a NACK, stop discovery, kill a proxy or agent",
	}
	caClock := newFaultAddCmd(g)
	caClock.Use, caClock.Short, caClock.Long = "ca-clock --offset D", "Shift the CA's clock (same as `fault add ca-clock --offset D`)", ""
	caClock.Args = cobra.NoArgs
	runAdd := caClock.RunE
	caClock.RunE = func(cmd *cobra.Command, _ []string) error { return runAdd(cmd, []string{api.FaultCAClock}) }
	cmd.AddCommand(newFaultAddCmd(g), newFaultListCmd(g), newFaultClearCmd(g), caClock)
	return cmd
}

func newFaultAddCmd(g *globalFlags) *cobra.Command {
	var (
		f      faultAddFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "add KIND [POD...]",
		Short: "Add a fault (" + strings.Join(api.FaultKinds, ", ") + ")",
		Long: `Adds a fault to the running lab and prints its id; ` + "`meshlab fault clear ID`" + ` undoes it.

  delay-push POD... --delay D   pushes of config to the pods' proxies wait D
  hold-push POD...              pushes are held: the proxies go STALE in proxy-status until cleared
  nack POD                      the control plane sends the pod's proxy a listener it rejects (NACK);
                                the proxy keeps its last good config
  discovery-stop --duration D   the discovery server drops every stream and serves nothing for D;
                                proxies keep serving and reconnect after (clears itself)
  kill-proxy POD                SIGKILL the live proxy epoch (the agent starts a new one)
  kill-agent POD                SIGKILL the pod's agent (the lab restarts it)
  ca-clock --offset D           the CA issues certificates valid from now+D (-25h: already
                                expired 24h certificates); clear resets the clock`,
		Args:              cobra.MinimumNArgs(1),
		SilenceUsage:      true,
		SilenceErrors:     true,
		ValidArgsFunction: completeArgs(true, fixedNames(api.FaultKinds...), labPods(g, true)),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := api.FaultSpec{Kind: args[0], Pods: args[1:], Delay: f.delay, Duration: f.duration, Offset: f.offset}
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.Fault, error) { return c.AddFault(ctx, spec) }, func(out io.Writer, fault api.Fault) error {
				fmt.Fprintf(out, "fault %s added: %s\n", fault.ID, faultSummary(fault))
				if fault.Message != "" {
					fmt.Fprintln(out, fault.Message)
				}
				return nil
			})
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().DurationVar(&f.delay, "delay", 0, "delay-push: how long each push waits (e.g. 500ms)")
	cmd.Flags().DurationVar(&f.duration, "duration", 0, "discovery-stop: how long the discovery server serves nothing (e.g. 2s)")
	cmd.Flags().DurationVar(&f.offset, "offset", 0, "ca-clock: how far to shift the CA's clock (e.g. -25h)")
	return cmd
}

func newFaultListCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the faults in force",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) ([]api.Fault, error) { return c.Faults(ctx) }, func(w io.Writer, fs []api.Fault) error { return printFaults(w, fs, time.Now()) })
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newFaultClearCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "clear [ID]",
		Short:             "Undo the fault ID, or every fault",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeArgs(false, labFaults(g)),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			fs, err := c.ClearFaults(cmd.Context(), id)
			if err != nil {
				return err
			}
			if fs == nil {
				fs = []api.Fault{}
			}
			return printOutput(cmd.OutOrStdout(), output, fs, func(out io.Writer) error {
				if len(fs) == 0 {
					fmt.Fprintln(out, "no fault in force")
				}
				for _, f := range fs {
					fmt.Fprintf(out, "fault %s cleared: %s\n", f.ID, faultSummary(f))
				}
				return nil
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// faultSummary says in a few words what f does.
func faultSummary(f api.Fault) string {
	s := f.Kind
	if len(f.Pods) > 0 {
		s += " " + strings.Join(f.Pods, ",")
	}
	if f.Delay > 0 {
		s += " delay " + f.Delay.String()
	}
	if f.Duration > 0 {
		s += " for " + f.Duration.String()
	}
	if f.Offset != 0 {
		s += " offset " + f.Offset.String()
	}
	return s
}

// printFaults writes the faults in force as a table.
func printFaults(w io.Writer, fs []api.Fault, now time.Time) error {
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "no fault in force")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tPODS\tDETAIL\tAGE")
	for _, f := range fs {
		detail := "-"
		switch {
		case f.Delay > 0:
			detail = "delay " + f.Delay.String()
		case f.Offset != 0:
			detail = "offset " + f.Offset.String()
		case f.Until != nil:
			detail = "until " + f.Until.Format(time.TimeOnly)
		}
		pods := strings.Join(f.Pods, ",")
		if pods == "" {
			pods = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.ID, f.Kind, pods, detail, now.Sub(f.Started).Round(time.Second))
	}
	return tw.Flush()
}
