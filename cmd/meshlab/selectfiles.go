package main

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
)

// docSeparator splits a YAML stream into its documents, as fileRefs reads them.
var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// selectFileObjects keeps, of the files' objects, those whose metadata.labels match
// selector, as kubectl apply -f FILE -l SELECTOR and delete -f FILE -l SELECTOR do
// (Bookinfo's `kubectl apply -f bookinfo.yaml -l service=reviews`). A file left with no
// object is dropped; n is how many objects were kept.
func selectFileObjects(files []api.ConfigFile, selector string) (kept []api.ConfigFile, n int, err error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, 0, fmt.Errorf("selector %q: %w", selector, err)
	}
	for _, f := range files {
		var docs []string
		for _, doc := range docSeparator.Split(f.Data, -1) {
			var h struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", f.Name, err)
			}
			if h.Kind == "" || !sel.Matches(labels.Set(h.Metadata.Labels)) {
				continue
			}
			docs = append(docs, strings.TrimLeft(doc, "\n"))
		}
		if len(docs) == 0 {
			continue
		}
		n += len(docs)
		f.Data = strings.Join(docs, "\n---\n")
		kept = append(kept, f)
	}
	return kept, n, nil
}
