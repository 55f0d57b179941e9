package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newCreateSecretCmd is kubectl create secret's tls and generic forms, as Istio's Secure
// Gateways task runs them: a v1 Secret made from files or literals and applied to the
// lab, where a Gateway's credentialName finds it.
// namespace is create's -n, which the docs write before the verb's words
// (`kubectl create -n istio-system secret tls ...`).
func newCreateSecretCmd(g *globalFlags, namespace *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret (tls|generic) NAME [flags]",
		Short: "Create a secret, as kubectl create secret",
	}

	var cert, key string
	tlsCmd := &cobra.Command{
		Use:   "tls NAME --cert=PATH --key=PATH",
		Short: "Create a TLS secret from a certificate and its key, as kubectl create secret tls",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cert == "" || key == "" {
				return fmt.Errorf("error: --cert and --key are required") //nolint:staticcheck // kubectl's text
			}
			certPEM, err := os.ReadFile(cert)
			if err != nil {
				return fmt.Errorf("error: %w", err)
			}
			keyPEM, err := os.ReadFile(key)
			if err != nil {
				return fmt.Errorf("error: %w", err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				return fmt.Errorf("error: failed to load key pair %w", err)
			}
			data := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}
			return createSecret(cmd, g, *namespace, args[0], "kubernetes.io/tls", data)
		},
	}
	tlsCmd.Flags().StringVar(&cert, "cert", "", "path to the PEM certificate (chain)")
	tlsCmd.Flags().StringVar(&key, "key", "", "path to the PEM private key of the certificate")

	var fromFile, fromLiteral []string
	var typ string
	genericCmd := &cobra.Command{
		Use:   "generic NAME [--type=string] [--from-file=[key=]source] [--from-literal=key1=value1]",
		Short: "Create a secret from files, directories or literal values, as kubectl create secret generic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := secretData(fromFile, fromLiteral)
			if err != nil {
				return err
			}
			return createSecret(cmd, g, *namespace, args[0], typ, data)
		},
	}
	genericCmd.Flags().StringArrayVar(&fromFile, "from-file", nil, "a file (key: its base name, or key=path) or a directory (each regular file in it)")
	genericCmd.Flags().StringArrayVar(&fromLiteral, "from-literal", nil, "a key and literal value (key=value)")
	genericCmd.Flags().StringVar(&typ, "type", "Opaque", "the secret's type")

	cmd.AddCommand(tlsCmd, genericCmd)
	return cmd
}

// secretData reads --from-file and --from-literal as kubectl does: a key may appear once.
func secretData(fromFile, fromLiteral []string) (map[string][]byte, error) {
	data := map[string][]byte{}
	put := func(k string, v []byte) error {
		if _, dup := data[k]; dup {
			return fmt.Errorf("error: cannot add key %s, another key by that name already exists in Data for Secret", k) //nolint:staticcheck // kubectl's text
		}
		data[k] = v
		return nil
	}
	for _, f := range fromFile {
		k, path, named := strings.Cut(f, "=")
		if !named {
			path, k = f, filepath.Base(f)
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("error: error reading %s: %w", path, err) //nolint:staticcheck // kubectl's text
		}
		if st.IsDir() {
			if named {
				return nil, fmt.Errorf("error: cannot give a key name for a directory path") //nolint:staticcheck // kubectl's text
			}
			entries, err := os.ReadDir(path)
			if err != nil {
				return nil, fmt.Errorf("error: %w", err)
			}
			for _, e := range entries {
				if !e.Type().IsRegular() {
					continue
				}
				b, err := os.ReadFile(filepath.Join(path, e.Name()))
				if err != nil {
					return nil, fmt.Errorf("error: %w", err)
				}
				if err := put(e.Name(), b); err != nil {
					return nil, err
				}
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("error: %w", err)
		}
		if err := put(k, b); err != nil {
			return nil, err
		}
	}
	for _, l := range fromLiteral {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("error: invalid literal source %s, expected key=value", l) //nolint:staticcheck // kubectl's text
		}
		if err := put(k, []byte(v)); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// createSecret applies the Secret unless one of that name exists (the API server's
// AlreadyExists, in kubectl create's words) and prints kubectl's line.
func createSecret(cmd *cobra.Command, g *globalFlags, namespace, name, typ string, data map[string][]byte) error {
	obj := kubeObject("v1", "Secret", name, namespace)
	obj["type"] = typ
	obj["data"] = data // []byte marshals as base64, as a Secret's data is written
	return createObject(cmd, g, obj, "secret", func() error {
		return fmt.Errorf("error: failed to create secret secrets %q already exists", name) //nolint:staticcheck // kubectl's text
	})
}

// kubeObject is an object of kind with its metadata (namespace "" is default).
func kubeObject(apiVersion, kind, name, namespace string) map[string]any {
	if namespace == "" {
		namespace = "default"
	}
	return map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
	}
}

// createObject is kubectl create's imperative forms: obj (kubeObject's) applied to the
// lab unless an object of its kind and name is in its namespace (then exists() is the
// error), and kubectl's line "<resource>/<name> created".
func createObject(cmd *cobra.Command, g *globalFlags, obj map[string]any, resource string, exists func() error) error {
	kind := obj["kind"].(string)
	meta := obj["metadata"].(map[string]any)
	name, namespace := meta["name"].(string), meta["namespace"].(string)
	c, err := g.apiClient()
	if err != nil {
		return err
	}
	defer c.Close()
	objs, err := c.Objects(cmd.Context(), kind, namespace, name)
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		return exists()
	}
	js, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if _, err := c.Apply(cmd.Context(), []api.ConfigFile{{Name: "<" + strings.ToLower(kind) + " " + name + ">", Data: string(js), Namespace: namespace}}); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s/%s created\n", resource, name)
	return nil
}
