package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// deleteConfig is what `meshlab delete` reads.
type deleteConfig struct {
	files     []string
	namespace string
	wait      bool          // --wait: return once every proxy runs the change
	timeout   time.Duration // --timeout: how long --wait waits
}

func newDeleteCmd(g *globalFlags) *cobra.Command {
	cfg := &deleteConfig{}
	var output string
	cmd := &cobra.Command{
		Use:               "delete (-f FILE|DIR|- | KIND NAME... | KIND/NAME...)",
		Short:             "Delete objects from a running lab, atomically",
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeArgs(false, labKinds(g), labObjects(g)),
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
			case len(args) > 0:
				refs, err := deleteRefs(args, cfg.namespace)
				if err != nil {
					return err
				}
				r.Refs = refs
			default:
				return errors.New("give -f FILE, KIND NAME or KIND/NAME")
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
			kinds, _ := c.Kinds(cmd.Context())
			if err := printChanges(cmd.OutOrStdout(), output, changes, kinds); err != nil || !cfg.wait {
				return err
			}
			return c.WaitSynced(cmd.Context(), cfg.timeout)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringSliceVarP(&cfg.files, "filename", "f", nil, "file, directory or - for stdin naming the objects to delete")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "default", "namespace of KIND NAME, or of -f's objects that name none")
	cmd.Flags().BoolVar(&cfg.wait, "wait", false, "return once every proxy runs the change (all SYNCED), not once it is stored")
	cmd.Flags().DurationVar(&cfg.timeout, "timeout", 30*time.Second, "how long --wait waits")
	return cmd
}

// deleteRefs reads kubectl delete's object arguments: KIND NAME [NAME...], or
// KIND/NAME [KIND/NAME...] (kubectl refuses mixing the two forms, and so does this).
func deleteRefs(args []string, namespace string) ([]api.ObjectRef, error) {
	var refs []api.ObjectRef
	if kind, _, slash := strings.Cut(args[0], "/"); !slash {
		if len(args) == 1 {
			return nil, fmt.Errorf("delete %s: give the names to delete (KIND NAME...), or KIND/NAME", kind)
		}
		for _, name := range args[1:] {
			if strings.Contains(name, "/") || name == "" {
				return nil, fmt.Errorf("delete %s: %q: after a KIND, give names, not KIND/NAME", kind, name)
			}
			refs = append(refs, api.ObjectRef{Kind: kind, Namespace: namespace, Name: name})
		}
		return refs, nil
	}
	for _, a := range args {
		kind, name, ok := strings.Cut(a, "/")
		if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("delete: %q: want KIND/NAME as every argument after the first KIND/NAME", a)
		}
		refs = append(refs, api.ObjectRef{Kind: kind, Namespace: namespace, Name: name})
	}
	return refs, nil
}
