package main

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
)

// docSeparator splits a YAML stream into its documents, as fileRefs reads them.
var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// fileHeader is what kubectl reads of a file's object to select, name, create or delete it.
type fileHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// ref names the object of file f as the lab records it (a Gateway API Gateway under the
// lab's kind for it; namespace when neither the object nor f names one).
func (h fileHeader) ref(f api.ConfigFile, namespace string) api.ObjectRef {
	kind := h.Kind
	if kind == "Gateway" && strings.HasPrefix(h.APIVersion, "gateway.networking.k8s.io/") {
		kind = api.GatewayAPIGatewayKind
	}
	return api.ObjectRef{Kind: kind, Namespace: cmp.Or(h.Metadata.Namespace, f.Namespace, namespace, "default"), Name: h.Metadata.Name}
}

// filterFileObjects keeps, of the files' objects, those keep accepts (a document naming
// no kind is dropped). A file left with no object is dropped; n is how many were kept.
func filterFileObjects(files []api.ConfigFile, keep func(api.ConfigFile, fileHeader) bool) (kept []api.ConfigFile, n int, err error) {
	for _, f := range files {
		var docs []string
		for _, doc := range docSeparator.Split(f.Data, -1) {
			var h fileHeader
			if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", f.Name, err)
			}
			if h.Kind == "" || !keep(f, h) {
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

// selectFileObjects keeps, of the files' objects, those whose metadata.labels match
// selector, as kubectl apply -f FILE -l SELECTOR and delete -f FILE -l SELECTOR do
// (Bookinfo's `kubectl apply -f bookinfo.yaml -l service=reviews`).
func selectFileObjects(files []api.ConfigFile, selector string) (kept []api.ConfigFile, n int, err error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, 0, fmt.Errorf("selector %q: %w", selector, err)
	}
	return filterFileObjects(files, func(_ api.ConfigFile, h fileHeader) bool {
		return sel.Matches(labels.Set(h.Metadata.Labels))
	})
}

// fileRefs names the objects of files by their headers, as kubectl reads them to delete.
func fileRefs(files []api.ConfigFile, namespace string) ([]api.ObjectRef, error) {
	var refs []api.ObjectRef
	_, _, err := filterFileObjects(files, func(f api.ConfigFile, h fileHeader) bool {
		if h.Metadata.Name != "" {
			refs = append(refs, h.ref(f, namespace))
		}
		return false
	})
	return refs, err
}

// takenOut is an object of a file that create or delete leaves alone, as kubectl does
// each object on its own: one that exists already (create) or does not (delete).
type takenOut struct {
	file string
	kind api.Kind
	name string
}

// takeOut splits the files' objects by whether the lab holds them: it returns the files
// without the objects whose presence is not want, and those objects. An object of a
// kind the lab does not list stays in, for the lab to accept or refuse.
func takeOut(ctx context.Context, c *api.Client, kinds api.Kinds, files []api.ConfigFile, namespace string, want bool) ([]api.ConfigFile, []takenOut, error) {
	var out []takenOut
	var lookupErr error
	kept, _, err := filterFileObjects(files, func(f api.ConfigFile, h fileHeader) bool {
		if lookupErr != nil || h.Metadata.Name == "" {
			return true
		}
		ref := h.ref(f, namespace)
		k, ok := kinds.Lookup(ref.Kind)
		if !ok {
			return true
		}
		objs, err := c.Objects(ctx, ref.Kind, ref.Namespace, ref.Name)
		if err != nil {
			lookupErr = err
			return true
		}
		if (len(objs) > 0) == want {
			return true
		}
		out = append(out, takenOut{file: f.Name, kind: k, name: ref.Name})
		return false
	})
	if err := cmp.Or(err, lookupErr); err != nil || len(out) == 0 {
		return files, nil, err // as written: the lab's messages name its lines
	}
	return kept, out, nil
}
