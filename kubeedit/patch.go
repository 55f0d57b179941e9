// Package kubeedit changes a Kubernetes object as kubectl's patch and edit do, the
// client's part and the API server's between them: a patch read as kubectl reads -p and
// --patch-file (YAML or JSON), applied as the API server applies each --type (strategic
// merge with the k8s.io/api types' patch metadata, JSON merge patch, JSON patch, with
// the server's errors in kubectl's words), and edit's file (the object as YAML under
// kubectl's header, read back with its comments dropped). It knows nothing of labs: the
// CLI reads the object, changes it here and applies the result.
package kubeedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// PatchType is kubectl patch's --type.
type PatchType int

// The patch types, as kubectl names them.
const (
	Strategic PatchType = iota // kubectl's default: the Go types' patchStrategy and patchMergeKey
	Merge                      // RFC 7386 JSON merge patch
	JSON                       // RFC 6902 JSON patch
)

// patchTypes are --type's values in kubectl's order (its error lists them so).
var patchTypes = []string{"json", "merge", "strategic"}

func (t PatchType) String() string {
	switch t {
	case Merge:
		return "merge"
	case JSON:
		return "json"
	}
	return "strategic"
}

// ParsePatchType reads --type as kubectl does ("" is strategic).
func ParsePatchType(s string) (PatchType, error) {
	switch strings.ToLower(s) {
	case "", "strategic":
		return Strategic, nil
	case "merge":
		return Merge, nil
	case "json":
		return JSON, nil
	}
	return 0, fmt.Errorf("--type must be one of %v, not %q", patchTypes, s)
}

// ParsePatch reads -p's text or --patch-file's contents as kubectl does: YAML or JSON,
// returned as JSON. An empty patch is kubectl's "must specify --patch or --patch-file".
func ParsePatch(text []byte) ([]byte, error) {
	if len(bytes.TrimSpace(text)) == 0 {
		return nil, errors.New("must specify --patch or --patch-file containing the contents of the patch")
	}
	js, err := yaml.ToJSON(text)
	if err != nil {
		return nil, fmt.Errorf("unable to parse %q: %w", string(text), err)
	}
	return js, nil
}

// StatusError is an answer the API server gives to a patch, as kubectl prints it.
type StatusError struct {
	Reason  string // the API's StatusReason: "BadRequest", "Invalid", "UnsupportedMediaType"
	Message string
}

func (e *StatusError) Error() string {
	if e.Reason == "Invalid" {
		// kubectl's checkErr for an Invalid status with neither kind nor name nor causes
		// (the server's answer to a JSON patch that does not apply).
		return "The request is invalid: " + e.Message
	}
	return "Error from server (" + e.Reason + "): " + e.Message
}

// unsupportedStrategic is the API server's answer to a strategic merge patch of a kind
// without Go types (a CRD's: Istio's, the Gateway API's), which kubectl prints as is.
const unsupportedStrategic = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"

// strategicTypes are the Go types, with their patch metadata, of the built-in kinds a
// lab holds, by group and kind; any other kind is a CRD's, which the API server patches
// by merge or JSON patch only.
var strategicTypes = map[schema.GroupKind]func() any{
	{Kind: "Service"}:                                                func() any { return &corev1.Service{} },
	{Kind: "Pod"}:                                                    func() any { return &corev1.Pod{} },
	{Kind: "ConfigMap"}:                                              func() any { return &corev1.ConfigMap{} },
	{Kind: "Secret"}:                                                 func() any { return &corev1.Secret{} },
	{Kind: "Namespace"}:                                              func() any { return &corev1.Namespace{} },
	{Kind: "ServiceAccount"}:                                         func() any { return &corev1.ServiceAccount{} },
	{Kind: "Endpoints"}:                                              func() any { return &corev1.Endpoints{} }, //nolint:staticcheck // a kind a cluster still serves
	{Group: "apps", Kind: "Deployment"}:                              func() any { return &appsv1.Deployment{} },
	{Group: "apps", Kind: "ReplicaSet"}:                              func() any { return &appsv1.ReplicaSet{} },
	{Group: "apps", Kind: "StatefulSet"}:                             func() any { return &appsv1.StatefulSet{} },
	{Group: "apps", Kind: "DaemonSet"}:                               func() any { return &appsv1.DaemonSet{} },
	{Group: "networking.k8s.io", Kind: "Ingress"}:                    func() any { return &networkingv1.Ingress{} },
	{Group: "networking.k8s.io", Kind: "IngressClass"}:               func() any { return &networkingv1.IngressClass{} },
	{Group: "policy", Kind: "PodDisruptionBudget"}:                   func() any { return &policyv1.PodDisruptionBudget{} },
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:          func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:               func() any { return &rbacv1.Role{} },
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:        func() any { return &rbacv1.ClusterRole{} },
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        func() any { return &rbacv1.RoleBinding{} },
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: func() any { return &rbacv1.ClusterRoleBinding{} },
}

// typeMeta is what Apply reads of an object to know it again after the patch.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func readTypeMeta(js []byte) (typeMeta, error) {
	var tm typeMeta
	err := json.Unmarshal(js, &tm)
	return tm, err
}

// Apply returns the object original (JSON, with apiVersion and kind) with patch (JSON,
// as ParsePatch returns it) applied as the API server applies a patch of type t, and
// reports whether that changed it (kubectl's "patched" against "patched (no change)").
// A patch the server would refuse is a *StatusError in its words; original is never
// modified.
func Apply(original, patch []byte, t PatchType) (patched []byte, changed bool, err error) {
	tm, err := readTypeMeta(original)
	if err != nil {
		return nil, false, fmt.Errorf("read the object: %w", err)
	}
	switch t {
	case Strategic:
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			return nil, false, fmt.Errorf("read the object's apiVersion %q: %w", tm.APIVersion, err)
		}
		newType, ok := strategicTypes[schema.GroupKind{Group: gv.Group, Kind: tm.Kind}]
		if !ok {
			return nil, false, &StatusError{Reason: "UnsupportedMediaType", Message: unsupportedStrategic}
		}
		patched, err = strategicpatch.StrategicMergePatch(original, patch, newType())
		if err != nil {
			return nil, false, &StatusError{Reason: "BadRequest", Message: err.Error()}
		}
	case Merge:
		patched, err = jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, false, &StatusError{Reason: "BadRequest", Message: err.Error()}
		}
	case JSON:
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, false, &StatusError{Reason: "BadRequest", Message: err.Error()}
		}
		patched, err = applyJSONPatch(ops, original)
		var internal *StatusError
		if errors.As(err, &internal) {
			return nil, false, err
		}
		if err != nil {
			// The API server answers 422 with its generic text, the cause in its log.
			return nil, false, &StatusError{Reason: "Invalid", Message: "the server rejected our request due to an error in our request"}
		}
	default:
		return nil, false, fmt.Errorf("patch type %d", t)
	}
	after, err := readTypeMeta(patched)
	if err != nil {
		return nil, false, &StatusError{Reason: "BadRequest", Message: err.Error()}
	}
	if err := sameObject(tm, after); err != nil {
		return nil, false, err
	}
	changed, err = differ(original, patched)
	if err != nil {
		return nil, false, err
	}
	return patched, changed, nil
}

// applyJSONPatch applies ops, answering a panic of the library (a whole-document replace
// without a value: FuzzPatch's find) as the API server's panic recovery answers it, 500.
func applyJSONPatch(ops jsonpatch.Patch, original []byte) (patched []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			patched, err = nil, &StatusError{Reason: "InternalError", Message: fmt.Sprintf("an error on the server (%q) has prevented the request from succeeding", fmt.Sprint(r))}
		}
	}()
	return ops.Apply(original)
}

// sameObject refuses a patch that made the object another, as the API server does: the
// name and namespace are the URL's, apiVersion and kind the resource's.
func sameObject(before, after typeMeta) error {
	switch {
	case after.Metadata.Name != before.Metadata.Name:
		return &StatusError{Reason: "BadRequest", Message: fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", after.Metadata.Name, before.Metadata.Name)}
	case after.Metadata.Namespace != before.Metadata.Namespace && after.Metadata.Namespace != "":
		return &StatusError{Reason: "BadRequest", Message: "the namespace of the provided object does not match the namespace sent on the request"}
	case after.Kind != before.Kind || after.APIVersion != before.APIVersion:
		return &StatusError{Reason: "BadRequest", Message: fmt.Sprintf("the patch may not change the object's apiVersion or kind (%s %s, was %s %s)", after.APIVersion, after.Kind, before.APIVersion, before.Kind)}
	}
	return nil
}

// differ reports whether two JSON documents hold different values (key order and
// number spelling aside).
func differ(a, b []byte) (bool, error) {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return false, err
	}
	return !reflect.DeepEqual(va, vb), nil
}

// Edited checks an edited object (JSON) against the original as the API server checks an
// update (the same name, namespace, apiVersion and kind), and reports whether it
// changed anything.
func Edited(original, edited []byte) (changed bool, err error) {
	before, err := readTypeMeta(original)
	if err != nil {
		return false, fmt.Errorf("read the object: %w", err)
	}
	after, err := readTypeMeta(edited)
	if err != nil {
		return false, &StatusError{Reason: "BadRequest", Message: err.Error()}
	}
	if err := sameObject(before, after); err != nil {
		return false, err
	}
	return differ(original, edited)
}
