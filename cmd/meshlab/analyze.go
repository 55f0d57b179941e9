package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/analyze"
)

// analyzeConfig is what `meshlab analyze` reads.
type analyzeConfig struct {
	files     []string // -f; none means the running lab's objects
	output    string
	threshold string // --failure-threshold
}

// exitError carries a process exit code other than 1 (main exits with it).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// ExitCode returns the process exit code.
func (e *exitError) ExitCode() int { return e.code }

func newAnalyzeCmd(g *globalFlags) *cobra.Command {
	cfg := &analyzeConfig{}
	cmd := &cobra.Command{
		Use:   "analyze [-f FILE]...",
		Short: "Find Istio's classic configuration mistakes in files, or in the running lab (exit 79 on errors, as istioctl)",
		Long: `analyze reports mistakes with Istio's analyzer codes where one exists (IST0101 referenced
host or subset not found, IST0106 schema validation error, IST0113 mTLS conflict,
IST0118 port naming, IST0127 no matching workloads) and meshlab codes (ML01xx) otherwise.
Without -f it analyses the objects of the running lab (--name).

Exit code: 79 when a finding is at or above --failure-threshold (default Error), as
istioctl analyze; 0 otherwise; 1 when analyze itself failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cfg.output); err != nil {
				return err
			}
			threshold, err := analyze.ParseLevel(cfg.threshold)
			if err != nil {
				return err
			}
			fs, err := analyzeInput(cmd.Context(), g, cfg.files)
			if err != nil {
				return err
			}
			if err := printOutput(cmd.OutOrStdout(), cfg.output, nonNil(fs), func(w io.Writer) error {
				return printFindings(w, fs)
			}); err != nil {
				return err
			}
			if l, ok := analyze.Max(fs); ok && l >= threshold {
				return &exitError{code: analyze.ExitIssues, msg: fmt.Sprintf("analyzers found issues at level %s or above", threshold)}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&cfg.files, "filename", "f", nil, "scenario file to analyse (repeatable; - for stdin)")
	cmd.Flags().StringVar(&cfg.threshold, "failure-threshold", "error", "lowest level that makes analyze exit 79: info, warning or error")
	addOutputFlag(cmd, &cfg.output)
	return cmd
}

// analyzeInput analyses the files, or the running lab's objects when there are none.
func analyzeInput(ctx context.Context, g *globalFlags, paths []string) ([]analyze.Finding, error) {
	if len(paths) > 0 {
		return analyze.Files(paths, os.Stdin)
	}
	c, err := g.apiClient()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	objs, err := c.Objects(ctx, "all", "", "")
	if err != nil {
		return nil, err
	}
	docs := make([]analyze.Document, 0, len(objs))
	for _, o := range objs {
		// JSON is YAML: each object becomes one document, named by its file.
		data := o.Object
		if !clusterScoped(api.Kind{Kind: o.Kind}) {
			data = withNamespace(o.Object, o.Namespace)
		}
		docs = append(docs, analyze.Document{Name: o.File, Data: data})
	}
	return analyze.Documents(docs), nil
}

// withNamespace returns an object as written with the namespace the lab stored it in:
// one applied with -n (or into a namespace by the file's Namespace) was written without
// metadata.namespace, and analyze would read it as the default namespace's (IST0101 for
// a VirtualService of foo naming foo's Service). An object that does not decode as a
// JSON object is returned as it is (analyze reports it).
func withNamespace(obj json.RawMessage, ns string) json.RawMessage {
	if ns == "" {
		return obj
	}
	var m map[string]any
	if json.Unmarshal(obj, &m) != nil {
		return obj
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	if s, _ := meta["namespace"].(string); s != "" {
		return obj
	}
	meta["namespace"] = ns
	out, err := json.Marshal(m)
	if err != nil {
		return obj
	}
	return out
}

func printFindings(w io.Writer, fs []analyze.Finding) error {
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "✔ No validation issues found.")
		return err
	}
	for _, f := range fs {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}

// nonNil returns fs, or an empty list, so JSON prints [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
