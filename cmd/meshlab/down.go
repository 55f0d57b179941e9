package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

func newDownCmd(g *globalFlags) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a lab and remove everything it created",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot("meshlab down"); err != nil {
				return err
			}
			name, err := g.labName()
			if err != nil {
				return err
			}
			return downWithProgress(cmd.OutOrStdout(), name, time.Second, func() error {
				return lab.Down(g.runRoot, name, timeout, g.logger())
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to let the lab stop by itself before removing it by force")
	return cmd
}

// downWithProgress runs down, saying what it waits for every tick while it runs (the
// sidecars drain for a few seconds, as Istio's terminationDrainDuration), then how long it
// took.
func downWithProgress(out io.Writer, name string, tick time.Duration, down func() error) error {
	start := time.Now()
	fmt.Fprintf(out, "stopping lab %s: its sidecars drain their connections, then everything it created is removed\n", name)
	done := make(chan error, 1)
	go func() { done <- down() }()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "lab %s is down (%.1fs)\n", name, time.Since(start).Seconds())
			return nil
		case <-t.C:
			fmt.Fprintf(out, "  waiting for lab %s to stop (%.0fs)...\n", name, time.Since(start).Seconds())
		}
	}
}

func newCleanCmd(g *globalFlags) *cobra.Command {
	var all, force bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove everything a lab left behind (after a crash or SIGKILL)",
		Long: `Remove everything a lab left behind after its process crashed or was killed: its
processes, network namespaces and run directory.

A running lab is refused (stop it with meshlab down) unless --force, which kills it.
--all cleans every lab whose record says you made it (SUDO_UID under sudo) and leaves
other users' labs, and labs that are running, alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot("meshlab clean"); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if all {
				if g.name != "" {
					return fmt.Errorf("clean: --all and --lab %s: choose one", g.name)
				}
				mine, skipped, err := lab.CleanableBy(g.runRoot, lab.CallerUID(), force)
				if err != nil {
					return err
				}
				for _, s := range skipped {
					fmt.Fprintf(out, "lab %s: left alone: %s\n", s.Name, s.Reason)
				}
				return cleanLabs(g, out, mine)
			}
			name := g.name
			if name == "" {
				n, err := g.labName()
				if err != nil {
					return err
				}
				name = n
			}
			if err := lab.CheckClean(g.runRoot, name, force); err != nil {
				return fmt.Errorf("clean lab %s: %w", name, err)
			}
			return cleanLabs(g, out, []string{name})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "clean every lab you made (its record names your uid) whose process is gone")
	cmd.Flags().BoolVar(&force, "force", false, "also kill and clean running labs")
	return cmd
}

func cleanLabs(g *globalFlags, out io.Writer, names []string) error {
	for _, n := range names {
		if err := lab.Clean(g.runRoot, n, g.logger()); err != nil {
			return fmt.Errorf("clean lab %s: %w", n, err)
		}
		fmt.Fprintf(out, "lab %s: cleaned\n", n)
	}
	return nil
}
