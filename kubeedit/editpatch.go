package kubeedit

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// kubectl edit opens the object as the API server returns it (its defaults, status and
// server fields) and sends only what the user changed: the two-way patch from what it
// opened to what was saved, strategic for the built-in kinds and a JSON merge patch for
// a CRD's, which the API server applies to its latest object. A resourceVersion the
// user changed travels in the patch (and is checked as any write's); the fields the
// API server keeps to itself (status on the main resource, uid, creationTimestamp,
// generation, managedFields) are not written through an edit.

// serverOwned are the metadata fields an update does not write.
var serverOwned = []string{"uid", "creationTimestamp", "generation", "managedFields", "selfLink"}

// EditPatch returns the patch of an edit from original (the object as shown) to edited
// (as saved), both JSON, without the fields the API server keeps to itself, and its type.
func EditPatch(original, edited []byte) ([]byte, PatchType, error) {
	tm, err := readTypeMeta(original)
	if err != nil {
		return nil, 0, fmt.Errorf("read the object: %w", err)
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, 0, fmt.Errorf("read the object's apiVersion %q: %w", tm.APIVersion, err)
	}
	var patch []byte
	t := Merge
	if newType, ok := strategicTypes[schema.GroupKind{Group: gv.Group, Kind: tm.Kind}]; ok {
		t = Strategic
		patch, err = strategicpatch.CreateTwoWayMergePatch(original, edited, newType())
	} else {
		patch, err = jsonpatch.CreateMergePatch(original, edited)
	}
	if err != nil {
		return nil, 0, &StatusError{Reason: "BadRequest", Message: err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, 0, err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		for _, k := range serverOwned {
			delete(meta, k)
		}
		if len(meta) == 0 {
			delete(m, "metadata")
		}
	}
	out, err := json.Marshal(m)
	return out, t, err
}
