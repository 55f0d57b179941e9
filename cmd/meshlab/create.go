package main

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newCreateCmd is kubectl create's imperative forms that Istio's docs use.
func newCreateCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create (namespace|ns NAME | secret (tls|generic) NAME)",
		Short: "Create an object in a running lab from the command line, as kubectl create",
	}
	var namespace string
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", "", "namespace of the object (default: default; not for namespaces)")
	cmd.AddCommand(newCreateNamespaceCmd(g), newCreateSecretCmd(g, &namespace))
	return cmd
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
