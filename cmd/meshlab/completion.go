package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

// newCompletionCmd returns `meshlab completion bash|zsh|fish|powershell`, cobra's
// generated scripts. Pod, service and lab names complete dynamically: the scripts call
// `meshlab __complete`, which reads /run/meshlab (lab records) and the lab API.
func newCompletionCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "Print a shell completion script (e.g. source <(meshlab completion bash))",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return fmt.Errorf("shell %q: want bash, zsh, fish or powershell", args[0])
		},
	}
	return cmd
}

// registerCompletions wires dynamic completion of lab names (--name) on root.
func registerCompletions(root *cobra.Command, g *globalFlags) {
	_ = root.RegisterFlagCompletionFunc("name", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names, _ := lab.Known(g.runRoot)
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// completePods completes the first argument with the lab's pod names (sidecar only when
// sidecar is set), read from its record.
func completePods(g *globalFlags, sidecar bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return podNames(g, sidecar), cobra.ShellCompDirectiveNoFileComp
	}
}

// podNames returns the pods of the resolved lab, or none when there is no lab.
func podNames(g *globalFlags, sidecar bool) []string {
	name, err := g.labName()
	if err != nil {
		return nil
	}
	r, err := lab.ReadRecord(lab.PathsFor(g.runRoot, name))
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range r.Pods {
		if p.Sidecar || !sidecar {
			out = append(out, p.Name)
		}
	}
	return out
}

// completeServices completes the first argument with the lab's Service names, from the
// lab API.
func completeServices(g *globalFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := g.apiClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		objs, err := c.Objects(cmd.Context(), "svc", "", "")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.Name)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
