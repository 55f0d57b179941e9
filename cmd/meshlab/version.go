package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/proxy"
	"github.com/meshlab/meshlab/lab"
)

// meshlabVersion is this tree's release, as the built-in proxy reports it in its
// server_info ("meshlab/1.0.0-dev/Clean/RELEASE/Go").
var meshlabVersion = strings.Split(proxy.Version, "/")[1]

func newVersionCmd(g *globalFlags) *cobra.Command {
	var (
		short  bool
		output string
		remote bool
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print meshlab's version, and the lab's control plane and proxy versions when a lab runs",
		Long: `Prints the client's version and, when a lab runs (the default lab, or --lab), the version
of its control plane (the lab process's binary) and of each sidecar's proxy (its
/server_info), as istioctl version does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := lab.VersionOptions{Release: meshlabVersion, RunRoot: g.runRoot, Output: output, Short: short}
			var labErr error
			if remote {
				o.Lab, labErr = g.versionLab()
			}
			if err := lab.WriteVersion(cmd.Context(), cmd.OutOrStdout(), o); err != nil {
				return err
			}
			return labErr
		},
	}
	cmd.Flags().BoolVarP(&short, "short", "s", true, "use --short=false to print full version information")
	cmd.Flags().StringVarP(&output, "output", "o", "", "one of yaml or json")
	cmd.Flags().BoolVar(&remote, "remote", true, "use --remote=false to leave out the lab's control plane and proxies")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// versionLab is the lab whose versions `version` adds: none when no lab is present (the
// client's version is the answer), an error (after the client's version is printed)
// when one cannot be chosen.
func (g *globalFlags) versionLab() (string, error) {
	if _, err := g.labName(); errors.Is(err, lab.ErrNoLab) {
		return "", nil
	}
	return g.existingLab()
}
