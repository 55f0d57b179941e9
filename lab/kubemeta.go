package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
)

// The API server's metadata on every object the lab's Kubernetes view renders (the one
// place that adds it: kubeView.selected asks each object's serverJSON): uid, resourceVersion and
// generation as the lab's store gave them (controlplane/config/servermeta.go), and the
// controllers' status observing that generation. What no object of the lab wrote (a
// Workload's pods and Service, istioctl's gateways, a Gateway API Gateway's automated
// Service and Deployment, the kubernetes Service, the namespaces every cluster has)
// takes a uid made from its owner's and its name, and its owner's resourceVersion.
// meshlab's own annotations (meshlab.dev/..., what the lab keeps of its pods' state) are
// not the API server's and are left out.

// labAnnotationPrefix prefixes the annotations the lab keeps for itself on written
// objects (model.AnnotationPodLabels and the like).
const labAnnotationPrefix = "meshlab.dev/"

// serverMeta is the API server's metadata of one object.
type serverMeta struct {
	uid             string
	resourceVersion int64
	generation      int64 // 0: the kind has none
}

// labUIDSpace is the UUID namespace of the uids made for what the lab makes itself.
var labUIDSpace = uuid.MustParse("6f1c3f57-4c2e-4b7a-9d0e-6d6573686c61")

// writtenIndex indexes the lab's store by kind, namespace and name (a cluster-scoped
// kind's namespace ""), for the renders of one request: each object looks its own up.
func (v kubeView) writtenIndex() map[config.Ref]*config.Object {
	idx := make(map[config.Ref]*config.Object, len(v.objects))
	for _, o := range v.objects {
		r := config.RefOf(o)
		if config.IsClusterScoped(r.Kind) {
			r.Namespace = ""
		}
		idx[r] = o
	}
	return idx
}

// writtenObject returns the object of the lab's store kind, namespace and name (a
// cluster-scoped kind's by name alone), nil when nothing wrote it; idx is writtenIndex's
// (nil: the store is searched).
func (v kubeView) writtenObject(idx map[config.Ref]*config.Object, kind, namespace, name string) *config.Object {
	cluster := config.IsClusterScoped(kind)
	if idx != nil {
		if cluster {
			namespace = ""
		}
		return idx[config.Ref{Kind: kind, Namespace: namespace, Name: name}]
	}
	for _, o := range v.objects {
		if o.Origin.Kind == kind && o.Origin.Name == name && (cluster || o.Origin.Namespace == namespace) {
			return o
		}
	}
	return nil
}

// owner returns the origin of what the lab made for kind namespace/name (a pod's, a
// Service's, a Deployment's model origin), false when the model has none.
func (v kubeView) owner(kind, namespace, name string) (model.Origin, bool) {
	switch kind {
	case "Pod":
		for _, p := range v.model.Pods {
			if p.Namespace == namespace && p.Name == name {
				return p.Origin, true
			}
		}
	case "Service":
		for _, s := range v.model.Services {
			if s.Namespace == namespace && s.Name == name {
				return s.Origin, true
			}
		}
		for _, e := range v.model.ExternalNames {
			if e.Namespace == namespace && e.Name == name {
				return e.Origin, true
			}
		}
	case "Deployment":
		for _, p := range v.model.Pods {
			if p.Origin.Kind == "Deployment" && p.Origin.Namespace == namespace && p.Origin.Name == name {
				return p.Origin, true
			}
		}
	}
	return model.Origin{}, false
}

// serverMetaOf is the API server's metadata of kind namespace/name created at created;
// idx is writtenIndex's.
func (v kubeView) serverMetaOf(idx map[config.Ref]*config.Object, kind, namespace, name string, created metav1.Time) serverMeta {
	if o := v.writtenObject(idx, kind, namespace, name); o != nil && o.UID != "" {
		return serverMeta{uid: o.UID, resourceVersion: o.ResourceVersion, generation: o.Generation}
	}
	seed, rv := "lab/"+v.started.UTC().Format("2006-01-02T15:04:05.000000000Z"), int64(1)
	if from, ok := v.owner(kind, namespace, name); ok {
		if o := v.writtenObject(idx, from.Kind, from.Namespace, from.Name); o != nil && o.UID != "" {
			seed, rv = o.UID, o.ResourceVersion
		}
	}
	m := serverMeta{
		uid:             uuid.NewSHA1(labUIDSpace, []byte(seed+"/"+kind+"/"+namespace+"/"+name+"/"+created.UTC().Format("2006-01-02T15:04:05Z"))).String(),
		resourceVersion: rv,
	}
	if config.CountsGeneration(kind) {
		m.generation = 1
	}
	return m
}

// setOn sets the API server's metadata on a typed object's meta: uid, resourceVersion,
// generation, and its annotations without meshlab's own (a new map: meta's may be the
// model's).
func (sm serverMeta) setOn(meta *metav1.ObjectMeta) {
	meta.UID = types.UID(sm.uid)
	meta.ResourceVersion = strconv.FormatInt(sm.resourceVersion, 10)
	meta.Generation = sm.generation
	for k := range meta.Annotations {
		if strings.HasPrefix(k, labAnnotationPrefix) {
			kept := make(map[string]string, len(meta.Annotations))
			for k, v := range meta.Annotations {
				if !strings.HasPrefix(k, labAnnotationPrefix) {
					kept[k] = v
				}
			}
			meta.Annotations = kept
			if len(kept) == 0 {
				meta.Annotations = nil
			}
			return
		}
	}
}

// marshal encodes obj, its meta set (setOn), with every observedGeneration its status
// holds the object's generation (sm.withObservedGeneration).
func (sm serverMeta) marshal(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return sm.withObservedGeneration(b), nil
}

// withObservedGeneration returns the compact JSON of a typed object whose status's
// observedGeneration fields (the object's, its conditions', its parents' and
// listeners') are the object's generation: the lab's controllers act on a change as it
// is stored. They are replaced in place, in the status only: the last "status" object
// of encoding/json's output of a Kubernetes type, whose Status field is its last (a
// condition's status is a string).
func (sm serverMeta) withObservedGeneration(b []byte) []byte {
	if sm.generation == 0 {
		return b
	}
	at := bytes.LastIndex(b, []byte(`"status":{`))
	if at < 0 || !bytes.Contains(b[at:], []byte(`"observedGeneration":`)) {
		return b
	}
	st := observedGeneration.ReplaceAll(b[at:], []byte(`"observedGeneration":`+strconv.FormatInt(sm.generation, 10)))
	return append(b[:at:at], st...)
}

// writtenJSON returns an object as written (raw, its status added) as the API server
// returns it: namespace (none for "", a cluster-scoped kind's), creationTimestamp,
// uid, resourceVersion, generation, meshlab's annotations left out; the metadata is
// decoded and encoded once.
func (sm serverMeta) writtenJSON(raw []byte, namespace string, created metav1.Time) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("read object: %w", err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(obj["metadata"], &meta); err != nil || meta == nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		meta[key] = b
		return err
	}
	delete(meta, "namespace")
	delete(meta, "generation")
	errs := []error{set("creationTimestamp", created), set("uid", sm.uid), set("resourceVersion", strconv.FormatInt(sm.resourceVersion, 10))}
	if namespace != "" {
		errs = append(errs, set("namespace", namespace))
	}
	if sm.generation > 0 {
		errs = append(errs, set("generation", sm.generation))
	}
	if a, ok := meta["annotations"]; ok && bytes.Contains(a, []byte(labAnnotationPrefix)) {
		var annotations map[string]string
		if json.Unmarshal(a, &annotations) == nil {
			for k := range annotations {
				if strings.HasPrefix(k, labAnnotationPrefix) {
					delete(annotations, k)
				}
			}
			if len(annotations) == 0 {
				delete(meta, "annotations")
			} else {
				errs = append(errs, set("annotations", annotations))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var err error
	if obj["metadata"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	if st, ok := obj["status"]; ok && sm.generation > 0 {
		obj["status"] = observedGeneration.ReplaceAll(st, []byte(`"observedGeneration":`+strconv.FormatInt(sm.generation, 10)))
	}
	return json.Marshal(obj)
}

// observedGeneration matches an observedGeneration field of compact JSON.
var observedGeneration = regexp.MustCompile(`"observedGeneration":-?\d+`)
