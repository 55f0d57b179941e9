package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/labs"
	"github.com/meshlab/meshlab/web"
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
			l, err := labs.Load(args[0])
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
			log := g.logger()
			guide := labs.NewGuide(l, labs.Runner{Logger: log})
			opts := lab.Options{
				Name: name, ScenarioFile: l.ScenarioFile, ScenarioData: l.ScenarioData, RunRoot: g.runRoot,
				ProxyPath: f.proxyPath, TerminationDrain: f.drain, Out: cmd.OutOrStdout(), Logger: log,
				Listen: f.listen, ListenFallback: !cmd.Flags().Changed("listen"),
				Routes: []web.Routes{web.GuideRoutes(guide)},
			}
			ctx := cmd.Context()
			running, err := lab.Start(ctx, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			st := guide.Begin(ctx, labs.NewLabBackend(running, g.runRoot, name))
			self := "meshlab"
			if strings.Contains(os.Args[0], "/") {
				self = os.Args[0]
			}
			fmt.Fprintf(out, "\n%s\n\n%s\n", l.Title, strings.TrimSpace(l.Introduction))
			printGuideState(out, st)
			if u := running.DashboardURL(); u != "" {
				fmt.Fprintf(out, "\nDashboard: %s\n", u)
			}
			fmt.Fprintf(out, "\nFrom another terminal:\n  sudo %[1]s lab check --name %[2]s   # check this step\n  sudo %[1]s lab next --name %[2]s    # go on\n  sudo %[1]s lab solve --name %[2]s   # apply the step's solution\nStop with Ctrl-C.\n", self, name)
			running.Wait(ctx)
			fmt.Fprintln(out, "stopping lab", name)
			return running.Close()
		},
	}
	cmd.Flags().StringVar(&f.listen, "listen", lab.DefaultListen, "address of the dashboard and the API on TCP (\"\" for none)")
	cmd.Flags().StringVar(&f.proxyPath, "envoy-path", "", "Envoy binary for every sidecar (default: the agent's discovery)")
	cmd.Flags().DurationVar(&f.drain, "drain-duration", 5*time.Second, "how long sidecars drain connections when the lab stops")
	return cmd
}

func printGuideState(w io.Writer, st web.GuideState) {
	fmt.Fprintf(w, "\nStep %d of %d: %s\n\n%s\n", st.Step, st.Steps, st.StepName, strings.TrimSpace(st.Instructions))
	if st.Error != "" {
		fmt.Fprintf(w, "\nThe step's setup failed: %s\n", st.Error)
	}
}

// printGuideCheck prints each check and reports whether all passed.
func printGuideCheck(w io.Writer, r web.GuideCheck) bool {
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
	return r.Passed
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
					printGuideState(w, st)
					return nil
				})
			}
			var r web.GuideCheck
			if verb == "solve" {
				r, err = c.GuideSolve(ctx)
			} else {
				r, err = c.GuideCheck(ctx)
			}
			if err != nil {
				return err
			}
			if r.Results == nil {
				r.Results = []web.CheckResult{}
			}
			if err := printOutput(out, output, r, func(w io.Writer) error {
				printGuideCheck(w, r)
				return nil
			}); err != nil {
				return err
			}
			if !r.Passed {
				return errLabFailed
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
