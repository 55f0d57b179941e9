package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
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
