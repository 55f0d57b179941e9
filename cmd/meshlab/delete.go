package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// deleteConfig is what `meshlab delete` reads.
type deleteConfig struct {
	files     []string
	namespace string
}

func newDeleteCmd(g *globalFlags) *cobra.Command {
	cfg := &deleteConfig{}
	var output string
	cmd := &cobra.Command{
		Use:               "delete (-f FILE|DIR|- | KIND NAME)",
		Short:             "Delete objects from a running lab, atomically",
		Args:              cobra.RangeArgs(0, 2),
		ValidArgsFunction: completeArgs(false, fixedNames(kindNames...), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var r api.DeleteRequest
			switch {
			case len(cfg.files) > 0 && len(args) > 0:
				return errors.New("give -f or KIND NAME, not both")
			case len(cfg.files) > 0:
				files, err := readConfigFiles(cfg.files, cmd.InOrStdin())
				if err != nil {
					return err
				}
				for i := range files {
					if cmd.Flags().Changed("namespace") {
						files[i].Namespace = cfg.namespace
					}
				}
				r.Files = files
			case len(args) == 2:
				r.Refs = []api.ObjectRef{{Kind: args[0], Namespace: cfg.namespace, Name: args[1]}}
			default:
				return errors.New("give -f FILE or KIND NAME")
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			for _, ref := range r.Refs {
				if err := checkObject(cmd.Context(), c, ref.Kind, ref.Namespace, ref.Name); err != nil {
					return err
				}
			}
			changes, err := c.Delete(cmd.Context(), r)
			if err != nil {
				return err
			}
			return printChanges(cmd.OutOrStdout(), output, changes)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringSliceVarP(&cfg.files, "filename", "f", nil, "file, directory or - for stdin naming the objects to delete")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "default", "namespace of KIND NAME, or of -f's objects that name none")
	return cmd
}
