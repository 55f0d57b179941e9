package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios"
	"github.com/meshlab/meshlab/scenarios/runner"
)

func newLabCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run labs: scenarios with steps and mesh-aware checks",
	}
	cmd.AddCommand(newLabListCmd(), newLabRunCmd(g), newLabStartCmd(g), newLabShowCmd(g),
		newLabGuideCmd(g, "check", "Send the current step's traffic afresh and check the step of a started lab"),
		newLabGuideCmd(g, "next", "Go to the next step of a started lab and run its setup"),
		newLabGuideCmd(g, "solve", "Apply the current step's solution and check it"))
	return cmd
}

// bundledLab is one line of `meshlab lab list`.
type bundledLab struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Steps int    `json:"steps"`
}

func newLabListCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the bundled labs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var list []bundledLab
			for _, n := range scenarios.LabNames() {
				l, err := runner.Load(n)
				if err != nil {
					return err
				}
				list = append(list, bundledLab{Name: n, Title: l.Title, Steps: len(l.Steps)})
			}
			return printOutput(cmd.OutOrStdout(), output, list, func(w io.Writer) error {
				for _, l := range list {
					fmt.Fprintf(w, "%-22s %s (%d steps)\n", l.Name, l.Title, l.Steps)
				}
				return nil
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

type labRunFlags struct {
	junit     string
	dryRun    bool
	proxyPath string
	drain     time.Duration
}

func newLabRunCmd(g *globalFlags) *cobra.Command {
	f := &labRunFlags{}
	cmd := &cobra.Command{
		Use:               "run <name|file>",
		Short:             "Bring a lab up, run every step and its checks, tear it down (exit 0 only when all pass)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNamesOrFiles(bundledLabs),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := runner.Load(args[0])
			if err != nil {
				return err
			}
			if f.dryRun {
				fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: %d steps\n", l.File, len(l.Steps))
				return nil
			}
			if err := requireRoot("meshlab lab run"); err != nil {
				return err
			}
			name := g.name
			if name == "" {
				name = defaultLabName(l.Name)
			}
			log := g.logger()
			_, err = runner.RunLab(cmd.Context(), runner.RunOptions{
				Lab: l,
				Up: lab.Options{Name: name, RunRoot: g.runRoot, ProxyPath: f.proxyPath, Logger: log, TerminationDrain: f.drain,
					Out: cmd.ErrOrStderr(), Listen: ""},
				Runner: runner.Runner{Out: cmd.OutOrStdout(), Logger: log},
				JUnit:  f.junit,
			})
			return err
		},
	}
	cmd.Flags().StringVar(&f.junit, "junit", "", "write a JUnit XML report to this file")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "validate the lab and exit, creating nothing")
	cmd.Flags().DurationVar(&f.drain, "drain-duration", 5*time.Second, "how long sidecars drain connections when the lab stops")
	cmd.Flags().StringVar(&f.proxyPath, "envoy-path", "", "Envoy binary for every sidecar (default: the agent's discovery)")
	return cmd
}

// defaultLabName is the lab's own name, cut to what a lab name may be.
func defaultLabName(name string) string {
	if len(name) > 20 {
		name = strings.TrimRight(name[:20], "-")
	}
	return name
}
