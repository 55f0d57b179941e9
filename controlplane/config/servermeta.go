package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/util/uuid"
)

// The metadata an API server gives what it stores: a uid at creation, kept for the
// object's life; a resourceVersion, etcd's revision of the object's last write, which
// moves on every change (a delete is a write too); a generation for the kinds whose
// registry strategy counts spec changes (1 at creation, one more at each change of
// anything but metadata and status). The lab's Scenario is its etcd: Apply and Delete
// stamp what they write (stamp), and `meshlab get -o yaml|json` prints them
// (lab/kubeview.go).

// LastAppliedAnnotation is kubectl apply's record of what it applied (client-side
// apply's three-way merge reads it): the object as the file wrote it, in JSON.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// CountsGeneration reports whether the API server sets metadata.generation on kind: the apps
// workloads, Ingress, IngressClass and PodDisruptionBudget (their registry strategies'
// PrepareForCreate), and every custom resource (Istio's, the Gateway API's and
// meshlab's own kinds are CRDs). Pods, Services, ConfigMaps, Secrets, Namespaces,
// ServiceAccounts, RBAC and HorizontalPodAutoscalers have none.
func CountsGeneration(kind string) bool {
	switch kind {
	case "Pod", "Service", "ConfigMap", "Secret", "Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "HorizontalPodAutoscaler":
		return false
	}
	return true
}

// stampCreated gives o, new to the store at revision rev, the metadata an API server
// gives a created object.
func stampCreated(o *Object, rev int64) {
	o.UID = string(uuid.NewUUID())
	o.ResourceVersion = rev
	if CountsGeneration(o.Origin.Kind) {
		o.Generation = 1
	}
	o.TemplateRevision = 1
}

// stampReplaced gives o, which replaces prev at revision rev, prev's uid and creation
// time, and prev's generation, one more when o's spec differs from prev's.
func stampReplaced(o, prev *Object, rev int64) {
	o.UID, o.Created = prev.UID, prev.Created
	o.ResourceVersion = rev
	o.Generation = prev.Generation
	if CountsGeneration(o.Origin.Kind) && !sameBesidesMeta(o.JSON, prev.JSON) {
		o.Generation++
	}
	o.TemplateRevision = prev.TemplateRevision
	if !sameJSON(podTemplate(o.JSON), podTemplate(prev.JSON)) {
		o.TemplateRevision++
	}
}

// podTemplate returns the JSON of a workload's spec.template, nil without one.
func podTemplate(js []byte) json.RawMessage {
	var w struct {
		Spec struct {
			Template json.RawMessage `json:"template"`
		} `json:"spec"`
	}
	if json.Unmarshal(js, &w) != nil {
		return nil
	}
	return w.Spec.Template
}

// sameJSON reports whether two JSON texts hold the same value (keys in any order).
func sameJSON(x, y []byte) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	var vx, vy any
	if json.Unmarshal(x, &vx) != nil || json.Unmarshal(y, &vy) != nil {
		return bytes.Equal(x, y)
	}
	jx, _ := json.Marshal(vx) // maps marshal with sorted keys: a canonical form
	jy, _ := json.Marshal(vy)
	return bytes.Equal(jx, jy)
}

// sameBesidesMeta reports whether two objects' JSON differ only in metadata and
// status: a change that does not move the generation.
func sameBesidesMeta(a, b []byte) bool {
	strip := func(js []byte) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if json.Unmarshal(js, &m) != nil {
			return nil
		}
		delete(m, "metadata")
		delete(m, "status")
		return m
	}
	ma, mb := strip(a), strip(b)
	if ma == nil || mb == nil {
		return bytes.Equal(a, b)
	}
	return maps.EqualFunc(ma, mb, func(x, y json.RawMessage) bool { return sameJSON(x, y) })
}

// withLastApplied returns d with kubectl apply's last-applied-configuration annotation,
// as kubectl's GetModifiedConfiguration makes it: the object as written, with the
// namespace apply gives an object naming none (a namespaced kind's), its annotations
// without the annotation itself (an empty map when it had no other: the "annotations":{}
// every applied object's record shows), encoded as compact JSON with sorted keys and a
// newline. namespace is apply -n's ("" for default). A document whose metadata or
// annotations are not mappings is returned as it is, for the decoder to refuse.
func withLastApplied(d document, namespace string) document {
	if d.top == nil {
		return d
	}
	meta, ok := d.top["metadata"].(map[string]any)
	if !ok {
		return d
	}
	annotations := map[string]any{}
	if a, has := meta["annotations"]; has && a != nil {
		am, ok := a.(map[string]any)
		if !ok {
			return d
		}
		annotations = maps.Clone(am)
	}
	delete(annotations, LastAppliedAnnotation)
	record := maps.Clone(d.top)
	recordMeta := maps.Clone(meta)
	recordMeta["annotations"] = annotations
	if kind, _ := d.top["kind"].(string); !clusterScoped[kind] {
		if ns, _ := meta["namespace"].(string); ns == "" {
			recordMeta["namespace"] = cmp.Or(namespace, DefaultNamespace)
		}
	}
	record["metadata"] = recordMeta
	js, err := json.Marshal(record)
	if err != nil {
		return d
	}
	stored := maps.Clone(annotations)
	stored[LastAppliedAnnotation] = string(js) + "\n"
	top := maps.Clone(d.top)
	m := maps.Clone(meta)
	m["annotations"] = stored
	top["metadata"] = m
	out := d
	if out.js, err = json.Marshal(top); err != nil {
		return d
	}
	out.top = top
	return out
}

// recordSize is the size in a document's JSON of kubectl apply's record, which the
// lab's size limits do not count (checkTotal): it is the object again.
func recordSize(d document) int {
	meta, _ := d.top["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	v, ok := annotations[LastAppliedAnnotation]
	if !ok {
		return 0
	}
	b, err := json.Marshal(map[string]any{LastAppliedAnnotation: v})
	if err != nil {
		return 0
	}
	return len(b) - 2 // the key and value, not the braces
}

// stampLoaded gives the objects of a scenario file, stored at once when the lab comes
// up, the metadata of created objects, one revision each in file order.
func (s *Scenario) stampLoaded() {
	for _, o := range s.Objects {
		s.Revision++
		stampCreated(o, s.Revision)
	}
}

// hasLastApplied reports whether an object's JSON holds kubectl apply's record.
func hasLastApplied(js []byte) bool {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &m) != nil {
		return false
	}
	_, ok := m.Metadata.Annotations[LastAppliedAnnotation]
	return ok
}

// fromServer reports whether a document is an object as an API server returned it
// (a cluster's dump: it has a uid or a resourceVersion).
func fromServer(d document) bool {
	meta, _ := d.top["metadata"].(map[string]any)
	_, uid := meta["uid"]
	_, rv := meta["resourceVersion"]
	return uid || rv
}

// IsClusterScoped reports whether objects of kind belong to no namespace.
func IsClusterScoped(kind string) bool { return clusterScoped[kind] }
