package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	"github.com/meshlab/meshlab/api"
)

// kubectl get's -o custom-columns=HEADER:PATH,... and -o custom-columns-file=FILE, as
// kubectl's CustomColumnsPrinter (k8s.io/kubectl/pkg/cmd/get/customcolumn.go, whose
// module meshlab does not carry for this one printer) reads and prints them: each PATH
// a relaxed JSONPath (metadata.name, .metadata.name, {.metadata.name}) run by
// client-go's jsonpath, as kubectl's, over the objects -o json prints; a cell holds the
// values found joined by commas, <none> without any; headers as written.

// customColumn is one column: its header and its JSONPath template.
type customColumn struct {
	header, path string
}

// relaxedPath matches what kubectl's RelaxedJSONPathExpression takes.
var relaxedPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// relaxedJSONPath turns a column's path into the template kubectl runs: {.PATH}.
func relaxedJSONPath(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	m := relaxedPath.FindStringSubmatch(path)
	if m == nil {
		return "", fmt.Errorf("unexpected path string %q, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'", path)
	}
	return "{." + m[1] + m[2] + "}", nil
}

// customColumnsOutput reads get's -o when it is a custom-columns form; ok reports
// whether it is one. The error names the spec or file that does not read.
func customColumnsOutput(format string) (cols []customColumn, ok bool, err error) {
	kind, arg, _ := strings.Cut(format, "=")
	switch kind {
	case "custom-columns":
		cols, err := parseCustomColumns(arg)
		return cols, true, err
	case "custom-columns-file":
		if arg == "" {
			return nil, true, errors.New("-o custom-columns-file: needs a file: -o custom-columns-file=FILE")
		}
		f, err := os.Open(arg)
		if err != nil {
			return nil, true, fmt.Errorf("-o custom-columns-file: %w", err)
		}
		defer f.Close()
		cols, err := parseCustomColumnsTemplate(f)
		if err != nil {
			return nil, true, fmt.Errorf("-o custom-columns-file=%s: %w", arg, err)
		}
		return cols, true, nil
	}
	return nil, false, nil
}

// parseCustomColumns reads a spec HEADER:PATH,HEADER:PATH...
func parseCustomColumns(spec string) ([]customColumn, error) {
	if spec == "" {
		return nil, errors.New("custom-columns format specified but no custom columns given")
	}
	parts := strings.Split(spec, ",")
	cols := make([]customColumn, len(parts))
	for i, p := range parts {
		header, path, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", p)
		}
		tmpl, err := relaxedJSONPath(path)
		if err != nil {
			return nil, err
		}
		if err := jsonpath.New(header).AllowMissingKeys(true).Parse(tmpl); err != nil {
			return nil, fmt.Errorf("custom-columns %s: parse %q: %w", header, path, err)
		}
		cols[i] = customColumn{header: header, path: tmpl}
	}
	return cols, nil
}

// parseCustomColumnsTemplate reads kubectl's columns file: a line of headers and a line
// of paths, separated by whitespace, as many of each.
func parseCustomColumnsTemplate(r io.Reader) ([]customColumn, error) {
	s := bufio.NewScanner(r)
	var lines []string
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(lines) != 2 {
		return nil, fmt.Errorf("invalid template, expected two lines in template but got %d", len(lines))
	}
	headers, paths := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(headers) != len(paths) {
		return nil, fmt.Errorf("ambiguous template, expected %d paths for %d headers, got %d", len(headers), len(headers), len(paths))
	}
	cols := make([]customColumn, len(headers))
	for i := range headers {
		tmpl, err := relaxedJSONPath(paths[i])
		if err != nil {
			return nil, err
		}
		if err := jsonpath.New(headers[i]).AllowMissingKeys(true).Parse(tmpl); err != nil {
			return nil, fmt.Errorf("column %s: parse %q: %w", headers[i], paths[i], err)
		}
		cols[i] = customColumn{header: headers[i], path: tmpl}
	}
	return cols, nil
}

// printCustomColumns prints objs in cols, a header line first.
func printCustomColumns(out io.Writer, cols []customColumn, objs []json.RawMessage) error {
	w := printers.GetNewTabWriter(out) // kubectl's
	heads := make([]string, len(cols))
	parsers := make([]*jsonpath.JSONPath, len(cols))
	for i, c := range cols {
		heads[i] = c.header
		parsers[i] = jsonpath.New(fmt.Sprintf("column%d", i)).AllowMissingKeys(true)
		if err := parsers[i].Parse(c.path); err != nil {
			return fmt.Errorf("custom-columns %s: %w", c.header, err)
		}
	}
	fmt.Fprintln(w, strings.Join(heads, "\t"))
	for _, raw := range objs {
		obj, err := decodeUnstructured(raw)
		if err != nil {
			return err
		}
		cells := make([]string, len(parsers))
		for i, p := range parsers {
			values, err := p.FindResults(obj)
			if err != nil {
				return fmt.Errorf("custom-columns %s: %w", cols[i].header, err)
			}
			var vs []string
			for _, set := range values {
				for _, v := range set {
					vs = append(vs, fmt.Sprintf("%v", v.Interface()))
				}
			}
			cells[i] = strings.Join(vs, ",")
			if len(values) == 0 || len(values[0]) == 0 {
				cells[i] = "<none>"
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// getCustomColumns is get KIND [NAME] -o custom-columns: the objects of the lab's
// Kubernetes view that -o json prints, one row each.
func getCustomColumns(ctx context.Context, c *api.Client, cfg *getConfig, kind, name string, cols []customColumn, out io.Writer) error {
	if kind == "all" {
		return errors.New("-o custom-columns: name a kind (pods, svc, deploy, gtw, ...), not all")
	}
	objs, err := c.KubeObjects(ctx, kind, cfg.namespace, name, cfg.selector)
	if err != nil {
		return err
	}
	if name != "" && len(objs) == 0 {
		return missingObject(ctx, c, kind, cfg.namespace, name)
	}
	raws := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		raws[i] = o.Object
	}
	return printCustomColumns(out, cols, raws)
}
