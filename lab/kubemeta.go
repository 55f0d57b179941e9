package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
)

// The API server's metadata on every object the lab's Kubernetes view renders (the one
// place that adds it: kubeView.selected calls serverObject): uid, resourceVersion and
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

// writtenObject returns the object of the lab's store kind, namespace and name (a
// cluster-scoped kind's by name alone), nil when nothing wrote it.
func (v kubeView) writtenObject(kind, namespace, name string) *config.Object {
	cluster := config.IsClusterScoped(kind)
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

// serverMetaOf is the API server's metadata of kind namespace/name created at created.
func (v kubeView) serverMetaOf(kind, namespace, name string, created metav1.Time) serverMeta {
	if o := v.writtenObject(kind, namespace, name); o != nil && o.UID != "" {
		return serverMeta{uid: o.UID, resourceVersion: o.ResourceVersion, generation: o.Generation}
	}
	seed, rv := "lab/"+v.started.UTC().Format("2006-01-02T15:04:05.000000000Z"), int64(1)
	if from, ok := v.owner(kind, namespace, name); ok {
		if o := v.writtenObject(from.Kind, from.Namespace, from.Name); o != nil && o.UID != "" {
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

// serverObject returns the rendered object raw of kind with the API server's metadata
// (serverMeta), meshlab's own annotations left out, and every observedGeneration its
// status holds (the object's, its conditions', its parents' and listeners') the
// object's generation: the lab's controllers act on a change as it is stored.
func (v kubeView) serverObject(kind, namespace, name string, raw []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(obj["metadata"], &meta); err != nil || meta == nil {
		return nil, fmt.Errorf("read %s metadata: %w", kind, err)
	}
	var created metav1.Time
	_ = json.Unmarshal(meta["creationTimestamp"], &created)
	sm := v.serverMetaOf(kind, namespace, name, created)
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		meta[key] = b
		return err
	}
	if err := set("uid", sm.uid); err != nil {
		return nil, err
	}
	if err := set("resourceVersion", strconv.FormatInt(sm.resourceVersion, 10)); err != nil {
		return nil, err
	}
	delete(meta, "generation")
	if sm.generation > 0 {
		if err := set("generation", sm.generation); err != nil {
			return nil, err
		}
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
			} else if err := set("annotations", annotations); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if obj["metadata"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	if st, ok := obj["status"]; ok && sm.generation > 0 {
		// The status is encoding/json's compact output: its observedGeneration fields
		// are replaced in place (decoding and encoding it again cost more than the
		// rest of the object's rendering).
		obj["status"] = observedGeneration.ReplaceAll(st, []byte(`"observedGeneration":`+strconv.FormatInt(sm.generation, 10)))
	}
	return json.Marshal(obj)
}

// observedGeneration matches an observedGeneration field of compact JSON.
var observedGeneration = regexp.MustCompile(`"observedGeneration":-?\d+`)
