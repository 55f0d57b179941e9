package main

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
)

// printKube prints objs as `kubectl get -o json|yaml` does, with kubectl's own printers
// (cli-runtime's JSONPrinter, four-space indent, and YAMLPrinter, keys sorted as the
// server's objects decode into unstructured): the object itself when get named exactly
// one and found it, else a v1 List of them, which kubectl's get makes of zero or several
// items (a kind, a selector, several names) with resourceVersion "".
func printKube(out io.Writer, format string, objs []json.RawMessage, single bool) error {
	items := make([]unstructured.Unstructured, len(objs))
	for i, raw := range objs {
		if err := items[i].UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("render object %d: %w", i, err)
		}
	}
	var obj runtime.Object
	if single && len(items) == 1 {
		obj = &items[0]
	} else {
		obj = &unstructured.UnstructuredList{
			Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}},
			Items:  items,
		}
	}
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if format == "yaml" {
		p = &printers.YAMLPrinter{}
	}
	return p.PrintObj(obj, out)
}
