package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newCreateCmd is kubectl create -f and the imperative forms that Istio's docs use.
func newCreateCmd(g *globalFlags) *cobra.Command {
	var namespace string
	var files []string
	cmd := &cobra.Command{
		Use:   "create (-f FILE|DIR|- | namespace|ns NAME | secret (tls|generic) NAME | configmap NAME | role NAME | rolebinding NAME)",
		Short: "Create objects in a running lab from files or the command line, as kubectl create",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("give -f FILE, or what to create: namespace NAME, secret tls|generic NAME, configmap NAME, role NAME, rolebinding NAME")
			}
			return createFiles(cmd, g, files, namespace)
		},
	}
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", "", "namespace of the object (default: default; not for namespaces)")
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "file, directory or - for stdin whose objects to create (none may exist yet)")
	cmd.AddCommand(newCreateNamespaceCmd(g), newCreateSecretCmd(g, &namespace), newCreateConfigMapCmd(g, &namespace),
		newCreateRoleCmd(g, &namespace), newCreateRoleBindingCmd(g, &namespace))
	return cmd
}

// createFiles is kubectl create -f: each of the files' objects on its own, as kubectl
// creates them: those the lab does not hold are applied as apply does, each one that
// exists already is kubectl's AlreadyExists, and any makes exit status 1.
func createFiles(cmd *cobra.Command, g *globalFlags, names []string, namespace string) error {
	files, err := readConfigFiles(names, cmd.InOrStdin())
	if err != nil {
		return err
	}
	for i := range files {
		files[i].Namespace = namespace
	}
	c, kinds, err := g.kindsClient(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	files, existing, err := takeOut(cmd.Context(), c, kinds, files, namespace, false)
	if err != nil {
		return err
	}
	var failed []error
	for _, o := range existing {
		res := o.kind.Resource(true)
		if o.kind.Group != "" {
			res += "." + o.kind.Group
		}
		failed = append(failed, fmt.Errorf("Error from server (AlreadyExists): error when creating %q: %s %q already exists", kubectlFileName(o.file), res, o.name)) //nolint:staticcheck // kubectl's text
	}
	if len(files) > 0 {
		changes, err := c.Apply(cmd.Context(), files)
		if err != nil {
			return err
		}
		if err := printChanges(cmd.OutOrStdout(), cmd.ErrOrStderr(), "", changes, kinds); err != nil {
			return err
		}
	}
	return errors.Join(failed...)
}

// kubectlFileName is a file's name as kubectl's messages give it (STDIN for -f -).
func kubectlFileName(name string) string {
	if name == "<stdin>" {
		return "STDIN"
	}
	return name
}

// newCreateNamespaceCmd is kubectl create namespace: a Namespace object applied to the
// lab. A namespace that already exists (declared, or one every cluster has) is refused
// as the API server refuses it; istio-system is created when no object declares it,
// since the docs create it before installing Istio.
func newCreateNamespaceCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "namespace NAME",
		Aliases: []string{"ns"},
		Short:   "Create a namespace, as kubectl create namespace",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			objs, err := c.Objects(cmd.Context(), "Namespace", "", name)
			if err != nil {
				return err
			}
			if len(objs) > 0 || (slices.Contains(builtinNamespaces, name) && name != "istio-system") {
				return fmt.Errorf("Error from server (AlreadyExists): namespaces %q already exists", name) //nolint:staticcheck // kubectl's text
			}
			data, err := json.Marshal(namespaceObject(name))
			if err != nil {
				return err
			}
			if _, err := c.Apply(cmd.Context(), []api.ConfigFile{{Name: "<namespace " + name + ">", Data: string(data)}}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace/%s created\n", name)
			return nil
		},
	}
}
