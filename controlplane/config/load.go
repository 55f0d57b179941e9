package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	extensions "istio.io/api/extensions/v1alpha1"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	knetworking "k8s.io/api/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/model"
)

// DefaultNamespace is the namespace of an object whose metadata names none.
const DefaultNamespace = "default"

// Scenario is a parsed and validated scenario file. It only exists when the whole file is
// valid; build the mesh from it with Build.
type Scenario struct {
	// File is the name used in messages (the base name for LoadFile).
	File string
	// Objects are the file's objects in file order.
	Objects []*Object
	// Skipped are the objects of a cluster's dump that the lab makes, derives or has no
	// use for (clusterdump.go), each with its reason, in file order.
	Skipped []Change
	// Revision is the resourceVersion of the last write (servermeta.go): etcd's
	// revision, one more for every object created, replaced or deleted.
	Revision int64
}

// Object is one document of a scenario, decoded into the type of its kind.
type Object struct {
	// Origin names the file, kind, namespace (defaulted) and name.
	Origin model.Origin
	// Doc is the 1-based index of the document in the file; Line is the line of its
	// "---" separator (1 for the first document).
	Doc, Line int
	// Item is the 1-based index of the object in its document's List items; 0 when the
	// document is not a List.
	Item int
	// Created is when the object was first loaded or applied (kept when an apply
	// replaces it, as an API server keeps creationTimestamp): kubectl's AGE.
	Created time.Time
	// UID, ResourceVersion and Generation are the metadata an API server gives the
	// object (servermeta.go): its uid, made when it is created and kept when an apply
	// replaces it; the scenario's Revision when it was last written; for the kinds that
	// count it (CountsGeneration), 1 at creation and one more at each change of its spec.
	UID             string
	ResourceVersion int64
	Generation      int64
	// TemplateRevision is a Deployment's revision as its controller numbers them
	// (deployment.kubernetes.io/revision): 1 at creation, one more at each change of
	// its pod template (a rollback too, as the controller gives the old ReplicaSet the
	// next number).
	TemplateRevision int64
	// Service is set when the kind is Service.
	Service *corev1.Service
	// Workload is set when the kind is Workload.
	Workload *Workload
	// KubeNamespace and ServiceAccount are set when the kind is Namespace or
	// ServiceAccount (v1). A Namespace's labels decide sidecar injection as in Istio.
	KubeNamespace  *corev1.Namespace
	ServiceAccount *corev1.ServiceAccount
	// VirtualService, DestinationRule and ServiceEntry hold the spec of an Istio object
	// of that kind, as written (hosts not resolved).
	VirtualService  *networking.VirtualService
	DestinationRule *networking.DestinationRule
	ServiceEntry    *networking.ServiceEntry
	// Gateway holds the spec of a networking.istio.io Gateway; Secret a v1 Secret (TLS
	// credentials a Gateway names).
	Gateway *networking.Gateway
	Secret  *corev1.Secret
	// ConfigMap holds a v1 ConfigMap: files a pod's configMap volumes mount.
	ConfigMap *corev1.ConfigMap
	// GatewayClass, KubeGateway, HTTPRoute, GRPCRoute, TCPRoute and TLSRoute hold a Kubernetes
	// Gateway API object (gateway.networking.k8s.io); a Gateway's Origin.Kind is
	// GatewayAPIGatewayKind.
	GatewayClass *gwv1.GatewayClass
	KubeGateway  *gwv1.Gateway
	HTTPRoute    *gwv1.HTTPRoute
	GRPCRoute    *gwv1.GRPCRoute
	TCPRoute     *gwv1.TCPRoute
	TLSRoute     *gwv1.TLSRoute
	// Ingress and IngressClass hold a networking.k8s.io/v1 object of that kind
	// (ingress.go).
	Ingress      *knetworking.Ingress
	IngressClass *knetworking.IngressClass
	// PeerAuthentication and AuthorizationPolicy hold the spec of a security.istio.io
	// object of that kind (v1beta1 and v1 share one schema).
	PeerAuthentication  *security.PeerAuthentication
	AuthorizationPolicy *security.AuthorizationPolicy
	// RequestAuthentication holds the spec of a security.istio.io RequestAuthentication.
	RequestAuthentication *security.RequestAuthentication
	// Telemetry holds the spec of a telemetry.istio.io Telemetry (v1alpha1 and v1).
	Telemetry *telemetry.Telemetry
	// Sidecar holds the spec of a networking.istio.io Sidecar (sidecar.go).
	Sidecar *networking.Sidecar
	// TrafficExtension holds the spec of an extensions.istio.io TrafficExtension
	// (trafficextension.go).
	TrafficExtension *extensions.TrafficExtension
	// MeshConfig is set when the kind is MeshConfig: Istio's MeshConfig, of which meshlab
	// reads outboundTrafficPolicy and rootNamespace.
	MeshConfig *meshv1alpha1.MeshConfig
	// JSON is the document as JSON, as it was written (for `meshlab get`).
	JSON []byte

	// The validated model forms, without addresses; Build copies them.
	svc  *model.Service
	pods []*model.Pod
	// secret is the model form of a valid TLS Secret.
	secret *model.Secret
	// kube is set for a Pod, Deployment, ReplicaSet, StatefulSet or DaemonSet.
	kube *kubeWorkload
	// recordBytes is the size of the last-applied-configuration the lab wrote into JSON
	// (withLastApplied): the size limits count the object as written.
	recordBytes int
}

// LoadFile reads and validates the scenario file at path. Messages name the file by its
// base name.
func LoadFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Load(filepath.Base(path), data)
}

// Load parses and validates the scenario in data; file is only used in messages. Every
// problem is collected: the error, when not nil, is an ErrorList.
func Load(file string, data []byte) (*Scenario, error) {
	var errs ErrorList
	if !checkFileSize(file, data, &errs) {
		return nil, errs
	}
	s := &Scenario{File: file}
	var bad []*Object
	docs := splitDocuments(data)
	if !checkDocumentCount(file, len(docs), &errs) {
		return nil, errs
	}
	docs, s.Skipped = skipMachinery(readDocuments(file, docs, &errs))
	for _, d := range docs {
		if !fromServer(d) {
			// A lab comes up as `kubectl apply -f FILE` would make it: each object
			// with apply's record (a cluster's dump keeps the one it has).
			d = withLastApplied(d, "")
		}
		// A cluster dump's resourceVersions are its cluster's: the lab's store gives
		// its own (stampLoaded).
		h := headerOf(d.top)
		d, _ = takeResourceVersion(d, problems{origin: model.Origin{File: file, Kind: h.kind, Namespace: cmp.Or(h.namespace, DefaultNamespace), Name: h.name}, doc: d.index, item: d.item, list: &errs})
		o, ok := decodeDocument(file, "", d, &errs)
		if o != nil {
			o.recordBytes = recordSize(d)
		}
		switch {
		case o == nil:
		case ok:
			s.Objects = append(s.Objects, o)
		default:
			bad = append(bad, o)
		}
	}
	checkScenario(s.Objects, bad, true, &errs)
	checkTotal(file, s.Objects, &errs)
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Or(cmp.Compare(a.Doc, b.Doc), cmp.Compare(a.Item, b.Item)) })
	if len(errs) > 0 {
		return nil, capErrors(errs)
	}
	s.stampLoaded()
	return s, nil
}

// decodeDocument parses one YAML document into an Object, recording its problems, and
// reports whether it is valid on its own. namespace is that of an object that names none
// ("" for default, as kubectl's -n). The Object is nil for an empty document and for
// one whose header (apiVersion, kind, metadata.name) could not be read.
func decodeDocument(file, namespace string, d document, errs *ErrorList) (*Object, bool) {
	p := problems{origin: model.Origin{File: file}, doc: d.index, item: d.item, list: errs}
	js, top := d.js, d.top
	if top == nil {
		var err error
		if js, err = yaml.YAMLToJSONStrict(d.padded()); err != nil {
			p.addf("", "parse YAML: %v", err)
			return nil, false
		}
		var raw any
		if err := json.Unmarshal(js, &raw); err != nil {
			p.addf("", "parse YAML: %v", err)
			return nil, false
		}
		if raw == nil {
			return nil, true // only comments or blank lines
		}
		var ok bool
		if top, ok = raw.(map[string]any); !ok {
			p.addf("", "document is not a mapping of fields (apiVersion, kind, metadata...)")
			return nil, false
		}
	}
	o := &Object{Doc: d.index, Item: d.item, Line: d.line, Origin: model.Origin{File: file}, Created: time.Now()}
	apiVersion, ok := readHeader(top, &o.Origin, p, namespace)
	if !ok {
		return nil, false
	}
	if IsLabDocument(apiVersion, o.Origin.Kind) {
		return nil, true // a lab's steps, for the lab runner
	}
	p.origin = o.Origin
	if !checkTree(js, top, o.Origin.Kind, p) {
		return o, false
	}
	n := len(*errs)
	switch decoderFor(apiVersion, o.Origin.Kind, p) {
	case kindService:
		o.Service = decodeKube(top, js, p, func(s *corev1.Service) { o.svc = validateService(s, p) })
	case kindWorkload:
		o.Workload = decodeKube(top, js, p, func(w *Workload) { o.pods = validateWorkload(w, p) })
	case kindNamespace:
		o.KubeNamespace = decodeKube(top, js, p, func(ns *corev1.Namespace) { validateNamespace(ns, p) })
	case kindServiceAccount:
		o.ServiceAccount = decodeKube(top, js, p, func(sa *corev1.ServiceAccount) { validateServiceAccount(sa, p) })
	case kindKubeWorkload:
		o.pods = decodeKubeWorkload(o.Origin.Kind, top, js, o, p)
	case kindVirtualService:
		o.VirtualService = decodeIstio(top, js, p, validateVirtualService)
	case kindDestinationRule:
		o.DestinationRule = decodeIstio(top, js, p, validateDestinationRule)
	case kindServiceEntry:
		o.ServiceEntry = decodeIstio(top, js, p, validateServiceEntry)
		if meta, ok := top["metadata"].(map[string]any); ok {
			labels := map[string]string{}
			written, _ := meta["labels"].(map[string]any)
			for k, v := range written {
				labels[k], _ = v.(string)
			}
			checkUseWaypoint(labels, "metadata.labels", p) // waypoint.go
		}
	case kindGatewayAPI:
		decodeGatewayAPI(top, js, o, p)
	case kindIngress:
		decodeIngress(top, js, o, p) // ingress.go
	case kindGateway:
		o.Gateway = decodeIstio(top, js, p, validateGateway)
	case kindSecret:
		o.Secret = decodeKube(top, js, p, func(sec *corev1.Secret) { o.secret = validateSecret(sec, o.Origin, p) })
	case kindConfigMap:
		o.ConfigMap = decodeKube(top, js, p, func(cm *corev1.ConfigMap) { checkName(p, "metadata.name", cm.Name, 253) })
	case kindMeshConfig:
		o.MeshConfig = decodeIstio(top, js, p, validateMeshConfig)
		checkInstalledGatewayK8s(js, p) // gateway.go
	case kindPeerAuthentication:
		o.PeerAuthentication = decodeIstio(top, js, p, validatePeerAuthentication)
	case kindAuthorizationPolicy:
		o.AuthorizationPolicy = decodeIstio(top, js, p, validateAuthorizationPolicy)
	case kindRequestAuthentication:
		o.RequestAuthentication = decodeIstio(top, js, p, validateRequestAuthentication)
	case kindTelemetry:
		o.Telemetry = decodeIstio(top, js, p, validateTelemetry)
	case kindSidecar:
		o.Sidecar = decodeIstio(top, js, p, validateSidecar)
	case kindTrafficExtension:
		o.TrafficExtension = decodeIstio(top, js, p, validateTrafficExtension)
	case kindStored:
		// Kept as written (o.JSON): get, describe and delete see it; nothing reads it.
	}
	checkDryRunAnnotation(top, apiVersion, o, p)
	o.JSON = compactJSON(js)
	return o, len(*errs) == n
}

// decodeKube decodes a Kubernetes-shaped document strictly (decodeStrict) into a new T
// and, when that worked, hands it to validate. It returns nil when the document does
// not decode.
func decodeKube[T any](top map[string]any, js []byte, p problems, validate func(*T)) *T {
	out := new(T)
	if !decodeStrict(top, js, out, p) {
		return nil
	}
	validate(out)
	return out
}

// decodeIstio decodes an Istio object (decodeProtoObject) into a new message and, when
// that worked, validates it. It returns nil when the document does not decode.
func decodeIstio[T any, M interface {
	*T
	proto.Message
}](top map[string]any, js []byte, p problems, validate func(M, problems)) M {
	out := M(new(T))
	if !decodeProtoObject(top, js, out, p) {
		return nil
	}
	validate(out, p)
	return out
}

// readHeader fills origin's kind, namespace and name from the document's top level,
// recording what is missing, and returns the apiVersion. It reports whether the header is
// complete enough to go on.
func readHeader(top map[string]any, origin *model.Origin, p problems, namespace string) (string, bool) {
	n := len(*p.list)
	str := func(m map[string]any, key, field string) string {
		v, ok := m[key]
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			p.addf(field, "must be a string")
		}
		return s
	}
	origin.Kind = str(top, "kind", "kind")
	p.origin.Kind = origin.Kind
	apiVersion := str(top, "apiVersion", "apiVersion")
	if origin.Kind == "Gateway" && isGatewayAPI(apiVersion) {
		origin.Kind = GatewayAPIGatewayKind // never the same object as Istio's Gateway
		p.origin.Kind = origin.Kind
	}
	var meta map[string]any
	switch m := top["metadata"].(type) {
	case map[string]any:
		meta = m
	case nil:
	default:
		p.addf("metadata", "must be a mapping")
	}
	origin.Name = str(meta, "name", "metadata.name")
	origin.Namespace = str(meta, "namespace", "metadata.namespace")
	mismatch := false
	switch {
	case namespace == "" || clusterScoped[origin.Kind]:
	case origin.Namespace == "":
		origin.Namespace = namespace
	case origin.Namespace != namespace:
		mismatch = true
	}
	if origin.Namespace == "" {
		origin.Namespace = DefaultNamespace
	}
	p.origin = *origin
	if mismatch {
		p.addf("metadata.namespace", "%q does not match the namespace %q given with -n (kubectl refuses it too)", origin.Namespace, namespace)
	}
	if apiVersion == "" {
		p.addf("apiVersion", "is required")
	}
	if origin.Kind == "" {
		p.addf("kind", "is required")
	}
	if origin.Name == "" {
		p.addf("metadata.name", "is required")
	}
	return apiVersion, len(*p.list) == n
}

// compactJSON strips the padding newlines the line-preserving parse added.
func compactJSON(js []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, js); err != nil {
		return js
	}
	return b.Bytes()
}
