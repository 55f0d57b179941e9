package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/kubeedit"
)

// applyConflict turns the lab's 409 Conflict answer to an apply (an object of the files
// written with a resourceVersion that is not the stored one's: nothing changed) into
// kubectl apply's error for it: the patch kubectl would have sent (the three-way merge
// of the lab's object's record, the file's object and the lab's object) and the object
// it was for. Departure: kubectl applies the files' other objects and reports this one's
// error at the end; a lab's apply is atomic, so none of them changed. When the object
// cannot be found again (another write came between), the lab's answer is printed as
// the API server words it.
func applyConflict(ctx context.Context, c *api.Client, files []api.ConfigFile, namespace string, answer error) error {
	plain := fmt.Errorf("Error from server (Conflict): %s", answer.Error()) //nolint:staticcheck // the API server's text
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return plain
	}
	for _, f := range files {
		for _, doc := range docSeparator.Split(f.Data, -1) {
			var h struct {
				fileHeader
				Metadata struct {
					Name            string `json:"name"`
					Namespace       string `json:"namespace"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if yaml.Unmarshal([]byte(doc), &h) != nil || h.Metadata.ResourceVersion == "" {
				continue
			}
			h.fileHeader.Metadata.Name, h.fileHeader.Metadata.Namespace = h.Metadata.Name, h.Metadata.Namespace
			ref := h.ref(f, namespace)
			k, ok := kinds.Lookup(ref.Kind)
			if !ok {
				continue
			}
			ns := ref.Namespace
			if clusterScoped(k) {
				ns = ""
			}
			current, err := c.KubeObjects(ctx, ref.Kind, ns, ref.Name, "")
			if err != nil || len(current) != 1 {
				continue
			}
			var cur struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if yaml.Unmarshal(current[0].Object, &cur) != nil || cur.Metadata.ResourceVersion == h.Metadata.ResourceVersion {
				continue
			}
			obj, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				continue
			}
			modified, err := kubeedit.WithApplyRecord(obj, ref.Namespace, !clusterScoped(k))
			if err != nil {
				continue
			}
			patch, err := kubeedit.ApplyPatch(modified, current[0].Object)
			if err != nil {
				continue
			}
			source := kubectlFileName(f.Name)
			message := strings.TrimPrefix(answer.Error(), "Error from server (Conflict): ")
			return kubeedit.ApplyConflict(source, h.APIVersion, h.Kind, k.Resource(true), ref.Name, ns, patch, message)
		}
	}
	return plain
}

// isConflict reports whether err is the lab's 409 answer to a write.
func isConflict(err error) bool { return errors.Is(err, api.ErrConflict) }
