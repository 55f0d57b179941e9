package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
)

// addOutputFlag registers the -o flag every verb that prints data shares, with its
// completion.
func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", "", "output format: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml", "text"}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an -o value other than "", text, json and yaml.
func checkOutput(format string) error {
	switch format {
	case "", "text", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: want json, yaml or text", format)
}

// printOutput writes v as JSON or YAML when format asks for it, else calls text.
func printOutput(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("render json: %w", err)
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("render yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	case "", "text":
		return text(w)
	}
	return checkOutput(format)
}

// queryLab is the whole run of a verb that reads the lab: it checks -o, asks the lab API
// with ask, and prints the answer as JSON or YAML, or with text.
func queryLab[T any](cmd *cobra.Command, g *globalFlags, output string, ask func(context.Context, *api.Client) (T, error), text func(io.Writer, T) error) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	c, err := g.apiClient()
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := ask(cmd.Context(), c)
	if err != nil {
		return err
	}
	return printOutput(cmd.OutOrStdout(), output, v, func(w io.Writer) error { return text(w, v) })
}
