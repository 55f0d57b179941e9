package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios/repro"
)

// newReproCmd returns `meshlab repro`: export a running lab as one reproducible file,
// and rebuild a lab from such a file comparing what it recorded with what happens now.
func newReproCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repro",
		Short: "Export a running lab as one reproducible file, or rebuild one from such a file",
	}
	cmd.AddCommand(newReproExportCmd(g), newReproRunCmd(g))
	return cmd
}

func newReproExportCmd(g *globalFlags) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the running lab's objects, xDS history, capture rules and proxy versions as one lab file",
		Example: `  sudo meshlab repro export --name x -f bug.yaml
  sudo meshlab repro run bug.yaml`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			facts, err := repro.Collect(ctx, c, time.Now())
			if err != nil {
				return err
			}
			objs, err := c.Objects(ctx, "all", "", "")
			if err != nil {
				return fmt.Errorf("list objects: %w", err)
			}
			var b bytes.Buffer
			if err := repro.Write(&b, facts, objs); err != nil {
				return err
			}
			if file == "" || file == "-" {
				_, err := cmd.OutOrStdout().Write(b.Bytes())
				return err
			}
			if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
				return fmt.Errorf("write repro file: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d objects, %d pods\n", file, len(objs), len(facts.Pods))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this file (default: standard output)")
	return cmd
}

func newReproRunCmd(g *globalFlags) *cobra.Command {
	var drain, timeout time.Duration
	cmd := &cobra.Command{
		Use:          "run FILE",
		Short:        "Bring a lab up from a repro file (in the foreground, like up) and show where it differs from the recording",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read repro file: %w", err)
			}
			recorded, err := repro.Read(data)
			if err != nil {
				return fmt.Errorf("read %s: %w", args[0], err)
			}
			if err := requireRoot("meshlab repro run"); err != nil {
				return err
			}
			name := g.name
			if name == "" {
				name = lab.DefaultName
			}
			opts := lab.Options{
				Name: name, ScenarioFile: args[0], ScenarioData: data, RunRoot: g.runRoot,
				TerminationDrain: drain, ReadyTimeout: timeout, Out: cmd.OutOrStdout(), Logger: g.logger(),
				Listen: lab.DefaultListen, ListenFallback: true,
			}
			ctx := cmd.Context()
			l, err := lab.Start(ctx, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			c := api.NewUnixClient(lab.PathsFor(g.runRoot, name).APISocket())
			if !repro.Settle(ctx, c, 10*time.Second) {
				fmt.Fprintln(out, "warning: not every proxy was SYNCED after 10s; comparing anyway")
			}
			now, err := repro.Collect(ctx, c, time.Now())
			c.Close()
			if err != nil {
				fmt.Fprintf(out, "could not read the new lab's facts: %v\n", err)
			} else {
				printReproDiff(out, recorded, now)
			}
			fmt.Fprintf(out, "lab %s is up; stop it with Ctrl-C or: sudo meshlab --name %s down\n", name, name)
			l.Wait(ctx)
			fmt.Fprintln(out, "stopping lab", name)
			return l.Close()
		},
	}
	cmd.Flags().DurationVar(&drain, "drain-duration", 5*time.Second, "how long sidecars drain connections when the lab stops")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, fmt.Sprintf("how long to wait for every pod to become ready (default: %s, or %s per pod when that is longer)", lab.DefaultReadyTimeout, lab.ReadyTimeoutPerPod))
	return cmd
}

// printReproDiff prints the recorded facts next to the new ones where they differ.
func printReproDiff(w io.Writer, recorded, now repro.Facts) {
	diffs := repro.Compare(recorded, now)
	fmt.Fprintf(w, "recorded from lab %s at %s; %d pods then, %d now\n",
		recorded.Lab, recorded.Exported.Format(time.RFC3339), len(recorded.Pods), len(now.Pods))
	if len(diffs) == 0 {
		fmt.Fprintln(w, "no differences: same pods, data planes, proxy versions, capture rules, xDS answers and NACKs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tFACT\tRECORDED\tNOW")
	for _, d := range diffs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Pod, d.Fact, d.Recorded, d.Now)
	}
	_ = tw.Flush()
}
