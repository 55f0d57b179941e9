package kubeedit

import (
	"encoding/json"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// kubectl apply over an object the API server holds sends a patch: the three-way merge
// of the object's last-applied record (original), the file's object with its new record
// (modified) and the server's object (current), strategic for the built-in kinds and a
// JSON merge patch for a CRD's. The file's metadata.resourceVersion travels in it, so an
// object read with `get -o yaml`, changed and applied after someone else's write is
// refused with 409 Conflict, which kubectl prints with the patch and the object it was
// for.

// lastApplied is kubectl apply's record of what it applied.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// WithApplyRecord returns obj (JSON) as kubectl apply sends it, its GetModifiedConfiguration:
// in namespace when it names none (namespaced is false for a cluster-scoped kind), with
// the last-applied-configuration annotation holding the object without it (annotations
// an empty map when it had no other), both encoded as the unstructured codec encodes
// them (sorted keys, a newline).
func WithApplyRecord(obj []byte, namespace string, namespaced bool) ([]byte, error) {
	var top map[string]any
	if err := json.Unmarshal(obj, &top); err != nil {
		return nil, fmt.Errorf("read the object: %w", err)
	}
	meta, _ := top["metadata"].(map[string]any)
	if meta == nil {
		return nil, fmt.Errorf("read the object: no metadata")
	}
	meta = maps.Clone(meta)
	top["metadata"] = meta
	if ns, _ := meta["namespace"].(string); ns == "" && namespaced {
		meta["namespace"] = namespace
	}
	annotations := map[string]any{}
	if a, ok := meta["annotations"].(map[string]any); ok {
		annotations = maps.Clone(a)
	}
	delete(annotations, lastApplied)
	meta["annotations"] = annotations
	record, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	withRecord := maps.Clone(annotations)
	withRecord[lastApplied] = string(record) + "\n"
	meta["annotations"] = withRecord
	out, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ApplyPatch returns kubectl apply's patch from current (the server's object, JSON) to
// modified (WithApplyRecord's): three-way with the record current holds as original.
func ApplyPatch(modified, current []byte) ([]byte, error) {
	tm, err := readTypeMeta(current)
	if err != nil {
		return nil, fmt.Errorf("read the object: %w", err)
	}
	var cur struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(current, &cur); err != nil {
		return nil, fmt.Errorf("read the object: %w", err)
	}
	var original []byte
	if r, ok := cur.Metadata.Annotations[lastApplied]; ok {
		original = []byte(r)
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("read the object's apiVersion %q: %w", tm.APIVersion, err)
	}
	if newType, ok := strategicTypes[schema.GroupKind{Group: gv.Group, Kind: tm.Kind}]; ok {
		meta, err := strategicpatch.NewPatchMetaFromStruct(newType())
		if err != nil {
			return nil, err
		}
		return strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
	}
	return jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, current)
}

// ApplyConflict is kubectl apply's error for the API server's 409 Conflict answer
// (message) to patch of the object kind name in namespace (apiVersion as the file
// writes it; resource kubectl's plural) from source (the file as named on the command
// line): cli-runtime's Info printed under the patch, and "error when patching" added by
// apply's patcher after its retries.
func ApplyConflict(source, apiVersion, kind, resource, name, namespace string, patch []byte, message string) error {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		gv = schema.GroupVersion{Version: apiVersion}
	}
	info := fmt.Sprintf("Resource: %q, GroupVersionKind: %q\nName: %q, Namespace: %q",
		gv.WithResource(resource).String(), gv.WithKind(kind).String(), name, namespace)
	return &StatusError{Reason: "Conflict", Message: fmt.Sprintf("error when applying patch:\n%s\nto:\n%s\nfor: %q: error when patching %q: %s", patch, info, source, source, message)}
}
