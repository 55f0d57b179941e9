package main

import (
	"fmt"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// newCreateConfigMapCmd is kubectl create configmap, as Istio's pages run it (nginx's and
// squid's configuration files for the egress and SNI passthrough tasks): a v1 ConfigMap
// made from files, directories or literals and applied to the lab, where a pod's
// configMap volume mounts it. namespace is create's -n.
func newCreateConfigMapCmd(g *globalFlags, namespace *string) *cobra.Command {
	var fromFile, fromLiteral []string
	cmd := &cobra.Command{
		Use:     "configmap NAME [--from-file=[key=]source] [--from-literal=key1=value1]",
		Aliases: []string{"cm"},
		Short:   "Create a config map from files, directories or literal values, as kubectl create configmap",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := secretData(fromFile, fromLiteral)
			if err != nil {
				return err
			}
			return createConfigMap(cmd, g, *namespace, args[0], data)
		},
	}
	cmd.Flags().StringArrayVar(&fromFile, "from-file", nil, "a file (key: its base name, or key=path) or a directory (each regular file in it)")
	cmd.Flags().StringArrayVar(&fromLiteral, "from-literal", nil, "a key and literal value (key=value)")
	return cmd
}

// createConfigMap applies the ConfigMap unless one of that name exists (kubectl create's
// AlreadyExists) and prints kubectl's line. Values that are UTF-8 go in data, others in
// binaryData, as kubectl puts them.
func createConfigMap(cmd *cobra.Command, g *globalFlags, namespace, name string, values map[string][]byte) error {
	data, binary := map[string]string{}, map[string][]byte{}
	for k, v := range values {
		if utf8.Valid(v) {
			data[k] = string(v)
		} else {
			binary[k] = v
		}
	}
	obj := kubeObject("v1", "ConfigMap", name, namespace)
	obj["data"] = data
	if len(binary) > 0 {
		obj["binaryData"] = binary // []byte marshals as base64, as binaryData is written
	}
	return createObject(cmd, g, obj, "configmap", func() error {
		return fmt.Errorf("error: failed to create configmap configmaps %q already exists", name) //nolint:staticcheck // kubectl's text
	})
}
