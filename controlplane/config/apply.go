package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// File is one file of objects sent to a running lab.
type File struct {
	Name string `json:"name"` // used in messages
	Data []byte `json:"data"`
	// Namespace is that of the objects that name none, as kubectl's apply -n ("" for
	// default); an object naming another is refused, as kubectl does.
	Namespace string `json:"namespace,omitempty"`
	// LastApplied gives each object kubectl apply's last-applied-configuration
	// annotation (LastAppliedAnnotation), as `kubectl apply` does and `kubectl create`
	// does not.
	LastApplied bool `json:"lastApplied,omitempty"`
}

// clusterScoped are the kinds that belong to no namespace: -n does not apply to them.
var clusterScoped = map[string]bool{"Namespace": true, "GatewayClass": true, "IngressClass": true, "ClusterRole": true, "ClusterRoleBinding": true}

// Ref names one object.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String renders the ref as "Kind namespace/name".
func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// RefOf returns the ref of an object.
func RefOf(o *Object) Ref {
	return Ref{Kind: o.Origin.Kind, Namespace: o.Origin.Namespace, Name: o.Origin.Name}
}

// Change is what Apply or Delete did to one object, as kubectl reports it.
type Change struct {
	Ref    Ref    `json:"ref"`
	Action string `json:"action"` // "created", "configured", "unchanged", "deleted" or ActionSkipped
	// Reason says why an object was skipped.
	Reason string `json:"reason,omitempty"`
	// Unrecorded: an apply replaced an object kubectl apply had not recorded (made by
	// create, or by the lab): kubectl warns that the last-applied-configuration
	// annotation is missing, and patches it in.
	Unrecorded bool `json:"unrecorded,omitempty"`
}

// String renders the change as kubectl does: "VirtualService default/reviews configured",
// "EndpointSlice shop/cart-x7 skipped: the lab derives endpoints from its pods and Services".
func (c Change) String() string {
	if c.Reason != "" {
		return c.Ref.String() + " " + c.Action + ": " + c.Reason
	}
	return c.Ref.String() + " " + c.Action
}

// Apply returns a new scenario: s with the objects of files created or replaced (matched
// by kind, namespace and name), the whole set validated as Load validates one file. s is
// never modified, so an error changes nothing. The error, when not nil, is an ErrorList.
func (s *Scenario) Apply(files ...File) (*Scenario, []Change, error) {
	var errs ErrorList
	var added []*Object
	versions := map[*Object]string{} // the resourceVersions objects were written with
	type fileDocs struct {
		f    File
		docs []document
	}
	var read []fileDocs
	var all []document
	for _, f := range files {
		if !checkFileSize(f.Name, f.Data, &errs) {
			continue
		}
		docs := splitDocuments(f.Data)
		if !checkDocumentCount(f.Name, len(docs), &errs) {
			continue
		}
		docs = readDocuments(f.Name, docs, &errs)
		read = append(read, fileDocs{f, docs})
		all = append(all, docs...)
	}
	// Owners are looked for across the files, as one apply of a directory would.
	reasons := machinery(all)
	var skipped []Change
	for _, fd := range read {
		for _, d := range fd.docs {
			why := reasons[0]
			reasons = reasons[1:]
			if why != "" {
				h := headerOf(d.top)
				skipped = append(skipped, Change{Ref: Ref{Kind: h.kind, Namespace: cmp.Or(h.namespace, fd.f.Namespace, DefaultNamespace), Name: h.name}, Action: ActionSkipped, Reason: why})
				continue
			}
			if fd.f.LastApplied {
				d = withLastApplied(d, fd.f.Namespace)
			}
			d = keepPodState(s, d, fd.f.Namespace)
			h := headerOf(d.top)
			d, rv := takeResourceVersion(d, problems{origin: model.Origin{File: fd.f.Name, Kind: h.kind, Namespace: cmp.Or(h.namespace, fd.f.Namespace, DefaultNamespace), Name: h.name}, doc: d.index, item: d.item, list: &errs})
			o, ok := decodeDocument(fd.f.Name, fd.f.Namespace, d, &errs)
			if o == nil || !ok {
				continue
			}
			o.recordBytes = recordSize(d)
			added = append(added, o)
			if rv != "" {
				versions[o] = rv
			}
		}
	}
	seen := map[Ref]*Object{}
	for _, o := range added {
		if prev, dup := seen[RefOf(o)]; dup {
			p := problems{origin: o.Origin, doc: o.Doc, item: o.Item, list: &errs}
			p.addf("metadata.name", "duplicate of the %s in %s", o.Origin.Kind, prev.Origin.File)
		}
		seen[RefOf(o)] = o
	}
	if len(errs) > 0 {
		return nil, nil, sortErrors(errs)
	}
	next := &Scenario{File: s.File, Objects: slices.Clone(s.Objects), Revision: s.Revision}
	var changes []Change
	for _, o := range added {
		i := slices.IndexFunc(next.Objects, func(x *Object) bool { return RefOf(x) == RefOf(o) })
		if i >= 0 {
			if err := checkVersion(o.Origin.File, o, next.Objects[i], versions[o]); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case i < 0:
			next.Revision++
			stampCreated(o, next.Revision)
			next.Objects = append(next.Objects, o)
			changes = append(changes, Change{Ref: RefOf(o), Action: "created"})
		case sameSpec(next.Objects[i], o):
			changes = append(changes, Change{Ref: RefOf(o), Action: "unchanged"})
		default:
			next.Revision++
			stampReplaced(o, next.Objects[i], next.Revision)
			unrecorded := hasLastApplied(o.JSON) && !hasLastApplied(next.Objects[i].JSON)
			next.Objects[i] = o
			changes = append(changes, Change{Ref: RefOf(o), Action: "configured", Unrecorded: unrecorded})
		}
	}
	if err := next.check(); err != nil {
		return nil, nil, err
	}
	return next, append(changes, skipped...), nil
}

// podStateAnnotations are what the lab keeps on a workload of what happened to its
// running pods (their own labels, the pods deleted), not of its manifest.
var podStateAnnotations = []string{model.AnnotationPodLabels, model.AnnotationDeletedPods}

// keepPodState returns d with the pod state annotations (podStateAnnotations) of the
// stored workload it replaces, when d does not write them itself: applying a workload's
// manifest again leaves its pods as they are, as kubectl apply's three-way merge keeps
// the annotations it did not write, so their labels stay and deleted pods do not come
// back. d is returned as it is otherwise.
func keepPodState(s *Scenario, d document, namespace string) document {
	if d.top == nil {
		return d
	}
	h := headerOf(d.top)
	if !slices.Contains([]string{"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"}, h.kind) {
		return d
	}
	ref := Ref{Kind: h.kind, Namespace: cmp.Or(h.namespace, namespace, DefaultNamespace), Name: h.name}
	i := slices.IndexFunc(s.Objects, func(x *Object) bool { return RefOf(x) == ref })
	if i < 0 {
		return d
	}
	var prev struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(s.Objects[i].JSON, &prev) != nil {
		return d
	}
	meta, _ := d.top["metadata"].(map[string]any)
	if meta == nil {
		return d
	}
	annotations, _ := meta["annotations"].(map[string]any)
	var kept map[string]any
	for _, k := range podStateAnnotations {
		v, had := prev.Metadata.Annotations[k]
		if _, writes := annotations[k]; !had || writes {
			continue
		}
		if kept == nil {
			kept = maps.Clone(annotations)
			if kept == nil {
				kept = map[string]any{}
			}
		}
		kept[k] = v
	}
	if kept == nil {
		return d
	}
	top := maps.Clone(d.top)
	m := maps.Clone(meta)
	m["annotations"] = kept
	top["metadata"] = m
	js, err := json.Marshal(top)
	if err != nil {
		return d
	}
	d.top, d.js = top, js
	return d
}

// Delete returns a new scenario: s without the objects refs name, validated as a whole
// (deleting a DestinationRule whose subsets a VirtualService routes to is an error). s
// is never modified. Kinds may be written as `meshlab get` accepts them.
func (s *Scenario) Delete(refs ...Ref) (*Scenario, []Change, error) {
	next := &Scenario{File: s.File, Objects: slices.Clone(s.Objects), Revision: s.Revision}
	var changes []Change
	var missing []string
	for _, r := range refs {
		if k, ok := CanonicalKind(r.Kind); ok {
			r.Kind = k
		}
		if r.Namespace == "" {
			r.Namespace = DefaultNamespace
		}
		i := slices.IndexFunc(next.Objects, func(x *Object) bool { return RefOf(x) == r })
		if i < 0 {
			missing = append(missing, r.String())
			continue
		}
		next.Objects = slices.Delete(next.Objects, i, i+1)
		next.Revision++ // a delete is a write of etcd's
		changes = append(changes, Change{Ref: r, Action: "deleted"})
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("delete: not found: %s", strings.Join(missing, ", "))
	}
	if err := next.check(); err != nil {
		return nil, nil, err
	}
	return next, changes, nil
}

// check runs the checks between objects on the whole scenario, as a running lab checks
// it: a Service may select no pod.
func (s *Scenario) check() error {
	var errs ErrorList
	checkScenario(s.Objects, nil, false, &errs)
	checkTotal(s.File, s.Objects, &errs)
	if len(errs) > 0 {
		return sortErrors(errs)
	}
	return nil
}

func sortErrors(errs ErrorList) ErrorList {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Origin.File, b.Origin.File), cmp.Compare(a.Doc, b.Doc), cmp.Compare(a.Item, b.Item))
	})
	return capErrors(errs)
}

// sameSpec reports whether two objects say the same thing, whatever their file.
func sameSpec(a, b *Object) bool {
	return bytes.Equal(a.JSON, b.JSON)
}

// Refs returns the objects a file names, reading only each document's header (for
// `meshlab delete -f`, whose file need not be valid against the lab). namespace is that of
// the objects that name none ("" for default), as kubectl's delete -n.
func Refs(file, namespace string, data []byte) ([]Ref, error) {
	var errs ErrorList
	var refs []Ref
	if !checkFileSize(file, data, &errs) {
		return nil, errs
	}
	docs := splitDocuments(data)
	if !checkDocumentCount(file, len(docs), &errs) {
		return nil, errs
	}
	var parsed []document
	for _, d := range docs {
		if len(d.data) > MaxObjectBytes && !isListKind(scanHeader(d.data).kind) {
			// Too large to parse; its header lines name it well enough to delete it.
			if h := scanHeader(d.data); h.kind != "" && h.name != "" {
				refs = append(refs, Ref{Kind: h.kind, Namespace: cmp.Or(h.namespace, namespace, DefaultNamespace), Name: h.name})
			} else {
				checkDocumentSize(file, d, &errs)
			}
			continue
		}
		d.parse()
		if d.top == nil {
			if _, err := yamlToJSON(d.padded()); err != nil {
				p := problems{origin: model.Origin{File: file}, doc: d.index, list: &errs}
				p.addf("", "parse YAML: %v", err)
			}
			continue
		}
		items, isList := listItems(d.top)
		if !isList {
			parsed = append(parsed, d)
			continue
		}
		for i, it := range items {
			if m, ok := it.(map[string]any); ok {
				parsed = append(parsed, document{index: d.index, item: i + 1, line: d.line, parsed: true, top: m})
			}
		}
	}
	// What a load skips is not in the lab: deleting it is not asked for.
	for i, why := range machinery(parsed) {
		if why != "" {
			continue
		}
		d := parsed[i]
		p := problems{origin: model.Origin{File: file}, doc: d.index, item: d.item, list: &errs}
		origin := model.Origin{File: file}
		if _, ok := readHeader(d.top, &origin, p, namespace); ok {
			refs = append(refs, Ref{Kind: origin.Kind, Namespace: origin.Namespace, Name: origin.Name})
		}
	}
	if len(errs) > 0 {
		return nil, capErrors(errs)
	}
	return refs, nil
}

// Find returns the objects of kind (any kind when "", else as CanonicalKind accepts it)
// and name (any when ""), sorted by kind, namespace and name.
func (s *Scenario) Find(kind, name string) ([]*Object, error) {
	if kind != "" {
		k, ok := CanonicalKind(kind)
		if !ok {
			return nil, fmt.Errorf("unknown kind %q (meshlab has %s)", kind, strings.Join(Kinds(), ", "))
		}
		kind = k
	}
	var out []*Object
	for _, o := range s.Objects {
		if (kind == "" || o.Origin.Kind == kind) && (name == "" || o.Origin.Name == name) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *Object) int {
		return cmp.Or(cmp.Compare(a.Origin.Kind, b.Origin.Kind), cmp.Compare(a.Origin.Namespace, b.Origin.Namespace), cmp.Compare(a.Origin.Name, b.Origin.Name))
	})
	return out, nil
}

// kindAliases maps the names kubectl users type to kinds.
var kindAliases = map[string]string{
	"service": "Service", "services": "Service", "svc": "Service",
	"workload": "Workload", "workloads": "Workload",
	"deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
	"replicaset": "ReplicaSet", "replicasets": "ReplicaSet", "rs": "ReplicaSet",
	"statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
	"daemonset": "DaemonSet", "daemonsets": "DaemonSet", "ds": "DaemonSet",
	"namespace": "Namespace", "namespaces": "Namespace", "ns": "Namespace",
	"serviceaccount": "ServiceAccount", "serviceaccounts": "ServiceAccount", "sa": "ServiceAccount",
	"virtualservice": "VirtualService", "virtualservices": "VirtualService", "vs": "VirtualService",
	"destinationrule": "DestinationRule", "destinationrules": "DestinationRule", "dr": "DestinationRule",
	"serviceentry": "ServiceEntry", "serviceentries": "ServiceEntry", "se": "ServiceEntry",
	"meshconfig": "MeshConfig", "meshconfigs": "MeshConfig",
	// With both Gateway kinds installed kubectl resolves gateway(s) to the Gateway API's
	// (Istio's Getting Started prints `kubectl get gateway` so); gw is Istio's short name.
	"gw": "Gateway", "gateways.networking.istio.io": "Gateway", "gateway.networking.istio.io": "Gateway",
	"gateway": GatewayAPIGatewayKind, "gateways": GatewayAPIGatewayKind,
	"gtw": GatewayAPIGatewayKind, "gateways.gateway.networking.k8s.io": GatewayAPIGatewayKind, "gateway.gateway.networking.k8s.io": GatewayAPIGatewayKind,
	"gatewayclass": "GatewayClass", "gatewayclasses": "GatewayClass", "gc": "GatewayClass",
	"httproute": "HTTPRoute", "httproutes": "HTTPRoute", "grpcroute": "GRPCRoute", "grpcroutes": "GRPCRoute",
	"tcproute": "TCPRoute", "tcproutes": "TCPRoute", "tlsroute": "TLSRoute", "tlsroutes": "TLSRoute", "ingress": "Ingress", "ingresses": "Ingress", "ing": "Ingress",
	"ingressclass": "IngressClass", "ingressclasses": "IngressClass", "secret": "Secret", "secrets": "Secret",
	"configmap": "ConfigMap", "configmaps": "ConfigMap", "cm": "ConfigMap",
	"peerauthentication": "PeerAuthentication", "peerauthentications": "PeerAuthentication", "pa": "PeerAuthentication",
	"authorizationpolicy": "AuthorizationPolicy", "authorizationpolicies": "AuthorizationPolicy", "ap": "AuthorizationPolicy",
	"requestauthentication": "RequestAuthentication", "requestauthentications": "RequestAuthentication", "ra": "RequestAuthentication",
	"telemetry": "Telemetry", "telemetries": "Telemetry", "telemetries.telemetry.istio.io": "Telemetry",
	"sidecar": "Sidecar", "sidecars": "Sidecar", "sidecars.networking.istio.io": "Sidecar",
	"trafficextension": "TrafficExtension", "trafficextensions": "TrafficExtension", "trafficextensions.extensions.istio.io": "TrafficExtension",
	"role": "Role", "roles": "Role", "roles.rbac.authorization.k8s.io": "Role",
	"rolebinding": "RoleBinding", "rolebindings": "RoleBinding", "rolebindings.rbac.authorization.k8s.io": "RoleBinding",
	"clusterrole": "ClusterRole", "clusterroles": "ClusterRole", "clusterroles.rbac.authorization.k8s.io": "ClusterRole",
	"clusterrolebinding": "ClusterRoleBinding", "clusterrolebindings": "ClusterRoleBinding", "clusterrolebindings.rbac.authorization.k8s.io": "ClusterRoleBinding",
	"poddisruptionbudget": "PodDisruptionBudget", "poddisruptionbudgets": "PodDisruptionBudget", "pdb": "PodDisruptionBudget",
	"horizontalpodautoscaler": "HorizontalPodAutoscaler", "horizontalpodautoscalers": "HorizontalPodAutoscaler", "hpa": "HorizontalPodAutoscaler",
}

// CanonicalKind returns the kind a user's spelling names ("vs", "virtualservices" and
// "VirtualService" all name VirtualService), reporting whether it names one. A kind as
// the lab records it names itself ("Gateway" is Istio's, though "gateway" is the
// Gateway API's).
func CanonicalKind(s string) (string, bool) {
	if slices.Contains(Kinds(), s) {
		return s, true
	}
	if k, ok := kindAliases[strings.ToLower(s)]; ok {
		return k, true
	}
	return groupedKind(strings.ToLower(s))
}

// groupedKind resolves kubectl's fully qualified spellings, RESOURCE.GROUP and
// RESOURCE.VERSION.GROUP ("authorizationpolicy.security.istio.io", Istio's clean-up
// lines; "deployments.v1.apps"): the resource as the short spellings name it, of the kind
// whose group is GROUP.
func groupedKind(s string) (string, bool) {
	resource, group, ok := strings.Cut(s, ".")
	if !ok {
		return "", false
	}
	groups := []string{group}
	if version, rest, ok := strings.Cut(group, "."); ok && strings.HasPrefix(version, "v") && strings.ContainsAny(version, "0123456789") {
		groups = append(groups, rest)
	}
	for _, k := range Kinds() {
		if !slices.Contains(groups, KindGroup(k)) {
			continue
		}
		if strings.ToLower(k) == resource || (kindAliases[resource] == k) || strings.ToLower(k)+"s" == resource {
			return k, true
		}
	}
	return "", false
}

// KindSpellings returns the spellings CanonicalKind takes for kind k, lower case and
// sorted (k itself lower-cased among them): the lab's discovery answers them.
func KindSpellings(k string) []string {
	var out []string
	if other, ok := kindAliases[strings.ToLower(k)]; !ok || other == k {
		out = append(out, strings.ToLower(k))
	}
	for alias, kind := range kindAliases {
		if kind == k {
			out = append(out, alias)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// KindGroup returns the API group of kind k as kubectl names its resource
// ("networking.istio.io", "apps", "meshlab.dev"), "" for Kubernetes' core group.
func KindGroup(k string) string {
	apiVersion := ""
	switch {
	case istioKinds[k] != "": // Istio's Gateway before the Gateway API's
		return istioKinds[k]
	case storedKinds[k] != "":
		return storedKinds[k]
	case k == GatewayAPIGatewayKind || gatewayAPIKinds[k]:
		return gatewayAPIGroup
	case fixedKindOK(k):
		apiVersion, _ = fixedKind(k)
	}
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return group
}

// Kinds returns the kinds a lab holds, sorted.
func Kinds() []string {
	return []string{"AuthorizationPolicy", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment", "DestinationRule", "GRPCRoute", "Gateway", GatewayAPIGatewayKind, "GatewayClass",
		"HTTPRoute", "HorizontalPodAutoscaler", "Ingress", "IngressClass", "MeshConfig", "Namespace", "PeerAuthentication", "PodDisruptionBudget", "ReplicaSet", "RequestAuthentication", "Role", "RoleBinding",
		"Secret", "Service", "ServiceAccount", "ServiceEntry", "Sidecar", "StatefulSet", "TCPRoute", "TLSRoute", "Telemetry", "TrafficExtension", "VirtualService", "Workload"}
}
