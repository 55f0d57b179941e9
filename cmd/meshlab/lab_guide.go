package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios/runner"
)

type labStartFlags struct {
	listen    string
	proxyPath string
	drain     time.Duration
}

// newLabStartCmd returns `meshlab lab start NAME`: the lab comes up as with `up`, and its
// process keeps a guide that `lab check|next|solve` drive over the lab API.
func newLabStartCmd(g *globalFlags) *cobra.Command {
	f := &labStartFlags{}
	cmd := &cobra.Command{
		Use:               "start <name|file>",
		Short:             "Bring a lab up and walk through it step by step (then: meshlab lab check, next, solve)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNamesOrFiles(bundledLabs),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := runner.Load(args[0])
			if err != nil {
				return err
			}
			if err := requireRoot("meshlab lab start"); err != nil {
				return err
			}
			name := g.name
			if name == "" {
				name = defaultLabName(l.Name)
			}
			return runner.StartGuided(cmd.Context(), runner.StartOptions{Lab: l, Out: cmd.OutOrStdout(), Up: lab.Options{
				Name: name, RunRoot: g.runRoot, ProxyPath: f.proxyPath, TerminationDrain: f.drain,
				Out: cmd.OutOrStdout(), Logger: g.logger(), Listen: f.listen, ListenFallback: !cmd.Flags().Changed("listen"),
			}})
		},
	}
	cmd.Flags().StringVar(&f.listen, "listen", lab.DefaultListen, "address of the dashboard and the API on TCP (\"\" for none)")
	cmd.Flags().StringVar(&f.proxyPath, "envoy-path", "", "Envoy binary for every sidecar (default: the agent's discovery)")
	cmd.Flags().DurationVar(&f.drain, "drain-duration", 5*time.Second, "how long sidecars drain connections when the lab stops")
	return cmd
}

// labDone says that the lab is finished and how to stop it.
func labDone(w io.Writer, lab string, passed, steps int, name string) {
	fmt.Fprintf(w, "\nLab %s done: %d of %d steps passed.\nStop it with Ctrl-C where `meshlab lab start` runs, or: sudo meshlab down --name %s\n", lab, passed, steps, name)
}

// printGuideCheck prints each check: what it saw, what it wanted and, when it failed, a
// hint.
func printGuideCheck(w io.Writer, r api.GuideCheck) {
	if r.Error != "" {
		fmt.Fprintf(w, "FAIL %s\n", r.Error)
	}
	for _, c := range r.Results {
		if c.Passed {
			fmt.Fprintf(w, "PASS %s: saw %s (want %s)\n", c.Check, c.Saw, c.Want)
		} else {
			fmt.Fprintf(w, "FAIL %s: saw %s; want %s\n     hint: %s\n", c.Check, c.Saw, c.Want, c.Hint)
		}
	}
	if r.Passed {
		fmt.Fprintf(w, "Step %d passed.\n", r.Step)
	}
}

// stepNotDone is the error of a check that failed: what is left to do.
func stepNotDone(r api.GuideCheck) error {
	failed := 0
	for _, c := range r.Results {
		if !c.Passed {
			failed++
		}
	}
	what := fmt.Sprintf("%d of %d checks failed", failed, len(r.Results))
	if r.Error != "" {
		what = "its actions failed"
	}
	return fmt.Errorf("step %d is not done yet (%s): fix what the FAIL lines say and run meshlab lab check again (meshlab lab show prints the step; meshlab lab solve applies its solution)", r.Step, what)
}

// newLabShowCmd returns `meshlab lab show`: the current step of a started lab.
func newLabShowCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the current step of a started lab: its instructions and the commands to run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.GuideState, error) { return c.Guide(ctx) }, func(w io.Writer, st api.GuideState) error {
				fmt.Fprintf(w, "%s (%d of %d steps passed)\n", st.Title, st.Passed, st.Steps)
				runner.WriteStep(w, st)
				return nil
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// newLabGuideCmd returns `meshlab lab check|next|solve`, which drive a started lab's guide.
// With -o json|yaml they print the API's answer: the step (next) or the check results
// (check, solve); a failed check still exits non-zero.
func newLabGuideCmd(g *globalFlags, verb, short string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			name, err := g.existingLab()
			if err != nil {
				return err
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if verb == "next" {
				st, err := c.GuideNext(ctx)
				if err != nil {
					return err
				}
				return printOutput(out, output, st, func(w io.Writer) error {
					if st.Done { // the last step passed: nowhere to go
						labDone(w, st.Lab, st.Passed, st.Steps, name)
						return nil
					}
					runner.WriteStep(w, st)
					return nil
				})
			}
			var r api.GuideCheck
			if verb == "solve" {
				r, err = c.GuideSolve(ctx)
			} else {
				r, err = c.GuideCheck(ctx)
			}
			if err != nil {
				return err
			}
			if r.Results == nil {
				r.Results = []api.CheckResult{}
			}
			if err := printOutput(out, output, r, func(w io.Writer) error {
				printGuideCheck(w, r)
				switch {
				case r.Done:
					st, err := c.Guide(ctx)
					if err != nil {
						return err
					}
					labDone(w, st.Lab, st.Passed, st.Steps, name)
				case r.Passed:
					fmt.Fprintln(w, "Go on: meshlab lab next")
				}
				return nil
			}); err != nil {
				return err
			}
			if !r.Passed {
				return stepNotDone(r)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
