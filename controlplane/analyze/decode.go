package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/config"
)

// object is one decoded document: its header and, when its spec decoded, the typed spec
// of its kind (at most one is set).
type object struct {
	ref  Object
	file string
	// labels are a Workload's pod labels.
	labels map[string]string
	// ports are a Workload's container ports.
	ports []int
	// annotations are a pod template's (an AuthorizationPolicy's own, for istio.io/dry-run);
	// inject is a Workload's spec.sidecar.inject
	// (nil: not set), or a pod template's sidecar.istio.io/inject label or annotation.
	annotations map[string]string
	inject      *bool
	// nsLabels are a Namespace's labels (namespace is set for a Namespace).
	namespace bool
	nsLabels  map[string]string

	svc      *corev1.Service
	workload bool
	vs       *networking.VirtualService
	dr       *networking.DestinationRule
	se       *networking.ServiceEntry
	pa       *security.PeerAuthentication
	ap       *security.AuthorizationPolicy
	gw       *networking.Gateway
	ra       *security.RequestAuthentication
}

// header is the part of every document analyze reads before its kind.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// decodeFiles decodes every document of files leniently: unknown fields are ignored
// (meshlab's loader reports them), and a document that does not decode is reported as a
// schema error and skipped.
func decodeFiles(files []config.File) ([]*object, []Finding) {
	var objs []*object
	var fs []Finding
	for _, f := range files {
		raws, _ := config.RawObjects(f.Name, f.Data)
		for _, raw := range raws {
			o, err := decodeDocument(f.Name, raw.Data)
			if err != nil {
				ref := Object{Kind: "document", Name: documentName(raw.Doc, raw.Item)}
				if o != nil {
					ref = o.ref
				}
				fs = append(fs, Finding{Level: Error, Code: CodeSchemaValidationError, Object: ref, File: f.Name,
					Message: "Schema validation error: " + err.Error()})
				continue
			}
			if o != nil {
				objs = append(objs, o)
			}
		}
	}
	return objs, fs
}

// documentName names a document that could not be decoded in a finding: its index, and
// its index in a List's items when it is one ("1 items[3]").
func documentName(doc, item int) string {
	if item > 0 {
		return fmt.Sprintf("%d items[%d]", doc, item-1)
	}
	return fmt.Sprint(doc)
}

// decodeDocument returns nil, nil for an empty document.
func decodeDocument(file string, doc []byte) (*object, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, fmt.Errorf("decode object header: %w", err)
	}
	ns := h.Metadata.Namespace
	if ns == "" {
		ns = config.DefaultNamespace
	}
	o := &object{ref: Object{Kind: h.Kind, Namespace: ns, Name: h.Metadata.Name}, file: file}
	spec := h.Spec
	if len(spec) == 0 {
		spec = []byte("{}")
	}
	var msg proto.Message
	switch h.Kind {
	case "Service":
		o.svc = &corev1.Service{}
		err = json.Unmarshal(js, o.svc)
	case "Workload":
		var w config.Workload
		err = json.Unmarshal(js, &w)
		o.workload, o.labels, o.ports = true, w.Spec.Labels, w.Spec.Ports
		o.annotations = w.Metadata.Annotations
		inject := true // a Workload's pods get a sidecar unless spec.sidecar.inject is false
		if w.Spec.Sidecar != nil && w.Spec.Sidecar.Inject != nil {
			inject = *w.Spec.Sidecar.Inject
		}
		o.inject = &inject
	case "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet":
		o.workload, o.labels, o.annotations, o.ports, err = kubePodTemplate(h.Kind, js)
		o.inject = injectChoice(o.labels, o.annotations)
	case "Namespace":
		var ns corev1.Namespace
		err = json.Unmarshal(js, &ns)
		o.ref.Namespace, o.namespace, o.nsLabels = "", true, ns.Labels
	case "VirtualService":
		o.vs = &networking.VirtualService{}
		msg = o.vs
	case "DestinationRule":
		o.dr = &networking.DestinationRule{}
		msg = o.dr
	case "ServiceEntry":
		o.se = &networking.ServiceEntry{}
		msg = o.se
	case "PeerAuthentication":
		o.pa = &security.PeerAuthentication{}
		msg = o.pa
	case "AuthorizationPolicy":
		o.ap = &security.AuthorizationPolicy{}
		o.annotations = h.Metadata.Annotations // istio.io/dry-run
		msg = o.ap
	case "RequestAuthentication":
		o.ra = &security.RequestAuthentication{}
		msg = o.ra
	case "Gateway":
		if strings.HasPrefix(h.APIVersion, "networking.istio.io/") { // not the Gateway API's
			o.gw = &networking.Gateway{}
			msg = o.gw
		}
	}
	if msg != nil {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(spec, msg)
	}
	if err != nil {
		return o, fmt.Errorf("decode %s spec: %w", h.Kind, err)
	}
	return o, nil
}

// kubePodTemplate reads what the workload checks need of a Kubernetes object that makes
// pods: its pods' labels and their first container's ports.
func kubePodTemplate(kind string, js []byte) (bool, map[string]string, map[string]string, []int, error) {
	type podSpec struct {
		Containers []struct {
			Ports []struct {
				ContainerPort int `json:"containerPort"`
			} `json:"ports"`
		} `json:"containers"`
	}
	type meta struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	var obj struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			podSpec
			Template struct {
				Metadata meta    `json:"metadata"`
				Spec     podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(js, &obj); err != nil {
		return false, nil, nil, nil, err
	}
	m, spec := obj.Spec.Template.Metadata, obj.Spec.Template.Spec
	if kind == "Pod" {
		m, spec = obj.Metadata, obj.Spec.podSpec
	}
	var ports []int
	if len(spec.Containers) > 0 {
		for _, p := range spec.Containers[0].Ports {
			ports = append(ports, p.ContainerPort)
		}
	}
	return true, m.Labels, m.Annotations, ports, nil
}
