package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios"
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

// registerCompletions wires dynamic completion of lab names (--lab, --name) on root.
func registerCompletions(root *cobra.Command, g *globalFlags) {
	labs := func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names, _ := lab.Known(g.runRoot)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	_ = root.RegisterFlagCompletionFunc("lab", labs)
	_ = root.RegisterFlagCompletionFunc("name", labs)
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
			out = append(out, p.Key)
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

// argNames returns the candidates for the next positional argument, given the ones
// already typed; nil when there is nothing to offer.
type argNames func(ctx context.Context, args []string) []string

// completeArgs completes positional argument i with the names at[i]; arguments past
// the end of at complete with the last entry when repeat is set (e.g. POD...).
func completeArgs(repeat bool, at ...argNames) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		i := len(args)
		if i >= len(at) {
			if !repeat || len(at) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			i = len(at) - 1
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		var out []string
		for _, n := range at[i](ctx, args) {
			if !slices.Contains(args, n) || i == 0 {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// fixedNames offers the same names whatever was typed.
func fixedNames(names ...string) argNames {
	return func(context.Context, []string) []string { return names }
}

// labPods offers the resolved lab's pods (with a sidecar only, when sidecar is set).
func labPods(g *globalFlags, sidecar bool) argNames {
	return func(context.Context, []string) []string { return podNames(g, sidecar) }
}

// labKinds offers the kinds the lab holds (its discovery), each by its shortest spelling
// (kubectl's short name where there is one), then extra, as kubectl completes resource
// types from the API server's discovery.
func labKinds(g *globalFlags, extra ...string) argNames {
	return func(ctx context.Context, _ []string) []string {
		c, err := g.apiClient()
		if err != nil {
			return extra
		}
		defer c.Close()
		kinds, err := c.Kinds(ctx)
		if err != nil {
			return extra
		}
		names := make([]string, 0, len(kinds)+len(extra))
		for _, k := range kinds {
			if len(k.Names) > 0 {
				names = append(names, slices.MinFunc(k.Names, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) }))
			}
		}
		slices.Sort(names)
		return append(names, extra...)
	}
}

// labObjects offers the names of the lab's objects of the kind typed as argument 0.
func labObjects(g *globalFlags) argNames {
	return func(ctx context.Context, args []string) []string {
		c, err := g.apiClient()
		if err != nil {
			return nil
		}
		defer c.Close()
		names, _ := objectNames(ctx, c, args[0])
		return names
	}
}

// labFaults offers the ids of the faults in force.
func labFaults(g *globalFlags) argNames {
	return func(ctx context.Context, _ []string) []string {
		c, err := g.apiClient()
		if err != nil {
			return nil
		}
		defer c.Close()
		fs, _ := c.Faults(ctx)
		var out []string
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
}

// bundledLabs offers the labs bundled in the binary.
func bundledLabs(context.Context, []string) []string { return scenarios.LabNames() }

// bundledScenarios offers the scenarios bundled in the binary.
func bundledScenarios(context.Context, []string) []string { return scenarios.Names() }

// labVersions offers the config versions kept of the pod typed as argument 0.
func labVersions(g *globalFlags) argNames {
	return func(ctx context.Context, args []string) []string {
		c, err := g.apiClient()
		if err != nil {
			return nil
		}
		defer c.Close()
		h, _ := c.PodHistory(ctx, args[0])
		var out []string
		for _, s := range h.Snapshots {
			out = append(out, s.Version)
		}
		return out
	}
}

// completeNamesOrFiles completes the first argument with names, or with a file path
// (for verbs that take a bundled name or a file).
func completeNamesOrFiles(names argNames) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(context.Background(), args), cobra.ShellCompDirectiveDefault
	}
}
