package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A cluster's state as a scenario. `kubectl get ... -A -o yaml` prints one `kind: List`
// whose items are the objects, each with what the cluster added to it (status,
// managedFields, uid, resourceVersion, ownerReferences, last-applied-configuration) and
// beside them the objects the cluster's own machinery made. A scenario file may be such a
// dump, or hold several:
//
//   - a List document (v1 List, or the API server's <Kind>List) reads as its items, each
//     named in messages by its index ("document 1 items[4]");
//   - status is dropped from every object: it is what the cluster observed, never what it
//     was asked to do;
//   - the objects a lab makes or derives itself are skipped, each with one line saying why
//     (machineryReason): events, Endpoints and EndpointSlices, the kube-system namespaces,
//     istio-system's own objects, the ReplicaSets and Pods a Deployment in the same input
//     made, the per-namespace kube-root-ca.crt and istio-ca-root-cert ConfigMaps and
//     default ServiceAccounts, and kinds that change nothing a lab runs (RBAC, CRDs,
//     webhooks, autoscalers...);
//   - a pod (or pod template) that Istio's injector already changed loses the injected
//     containers and volumes and keeps the sidecar as a choice (stripInjected).

// ActionSkipped is the Change action of an object that a cluster holds but a lab makes,
// derives or has no use for; the Change's Reason says which.
const ActionSkipped = "skipped"

// listItems returns the items of a List document's top level and whether it is one:
// kind List (v1) or <Kind>List as the API server answers a list, with an items array.
func listItems(top map[string]any) ([]any, bool) {
	k, _ := top["kind"].(string)
	if k != "List" && (!strings.HasSuffix(k, "List") || len(k) == len("List")) {
		return nil, false
	}
	items, ok := top["items"].([]any)
	if !ok && top["items"] != nil {
		return nil, false
	}
	return items, true
}

// readDocuments parses the documents of one file once, expands its Lists into their
// items, checks the limits that apply before decoding, and takes out what a cluster's own
// machinery made (skipped, one Change each). The result feeds decodeDocument.
func readDocuments(file string, docs []document, errs *ErrorList) []document {
	var out []document
	for _, d := range docs {
		if len(d.data) > MaxObjectBytes && !isListKind(scanHeader(d.data).kind) {
			checkDocumentSize(file, d, errs)
			continue
		}
		d.parse()
		items, isList := listItems(d.top)
		if !isList {
			if len(d.data) > MaxObjectBytes {
				checkDocumentSize(file, d, errs)
				continue
			}
			out = append(out, d)
			continue
		}
		for i, it := range items {
			item := document{index: d.index, item: i + 1, line: d.line}
			m, ok := it.(map[string]any)
			if !ok {
				*errs = append(*errs, &Error{Origin: model.Origin{File: file}, Doc: d.index, Item: i + 1,
					Msg: "a List's item must be a mapping of fields (apiVersion, kind, metadata...)"})
				continue
			}
			js, err := json.Marshal(m)
			if err != nil {
				*errs = append(*errs, &Error{Origin: model.Origin{File: file}, Doc: d.index, Item: i + 1, Msg: fmt.Sprintf("encode: %v", err)})
				continue
			}
			item.data, item.js, item.top, item.parsed = js, js, m, true
			out = append(out, item)
		}
	}
	if len(out) > MaxDocuments {
		*errs = append(*errs, &Error{Origin: originOfFile(file), Doc: 1,
			Msg: fmt.Sprintf("the file holds %d objects (its documents and their List items), above the limit of %d", len(out), MaxDocuments)})
		return nil
	}
	for i := range out {
		if out[i].top != nil {
			dropStatus(&out[i])
			stripInjected(&out[i])
		}
	}
	return out
}

// isListKind reports whether a kind read from a document's header is a List's.
func isListKind(k string) bool {
	return k == "List" || (strings.HasSuffix(k, "List") && len(k) > len("List"))
}

// parse fills d's JSON form and top level once; a document that does not parse keeps
// them nil, and decodeDocument reports why.
func (d *document) parse() {
	if d.parsed {
		return
	}
	d.parsed = true
	js, err := yamlToJSON(d.padded())
	if err != nil {
		return
	}
	var top map[string]any
	if json.Unmarshal(js, &top) != nil || top == nil {
		return
	}
	d.js, d.top = js, top
}

// reencode refreshes d's JSON form after its top level was changed.
func (d *document) reencode() {
	if js, err := json.Marshal(d.top); err == nil {
		d.js = js
	}
}

// dropStatus removes an object's status: what the cluster observed of it.
func dropStatus(d *document) {
	if _, ok := d.top["status"]; !ok {
		return
	}
	delete(d.top, "status")
	d.reencode()
}

// Istio's injector adds these to a pod (pkg/kube/inject's templates): the proxy and its
// init or validation container, and the volumes they mount.
var (
	injectedContainers = []string{"istio-proxy"}
	injectedInits      = []string{"istio-init", "istio-validation"}
	injectedVolumes    = []string{"istio-envoy", "istio-data", "istio-podinfo", "istio-token", "istiod-ca-cert", "workload-socket", "credential-socket", "workload-certs"}
)

// sidecarStatusAnnotation is the injector's record on a pod it changed.
const sidecarStatusAnnotation = "sidecar.istio.io/status"

// stripInjected undoes Istio's injection on a Pod, or on the pod template of a workload
// (`istioctl kube-inject` output), so that the app container is the pod's only one: the
// lab injects its own sidecar. The pod keeps the sidecar as its choice (the
// sidecar.istio.io/inject annotation) unless it states one already.
func stripInjected(d *document) {
	k, _ := d.top["kind"].(string)
	var meta, spec map[string]any
	switch {
	case k == "Pod":
		meta, _ = d.top["metadata"].(map[string]any)
		spec, _ = d.top["spec"].(map[string]any)
	case kubeWorkloadKinds[k] != "":
		s, _ := d.top["spec"].(map[string]any)
		tmpl, _ := s["template"].(map[string]any)
		meta, _ = tmpl["metadata"].(map[string]any)
		spec, _ = tmpl["spec"].(map[string]any)
	}
	if spec == nil {
		return
	}
	annotations, _ := meta["annotations"].(map[string]any)
	_, injected := annotations[sidecarStatusAnnotation]
	changed := removeNamed(spec, "containers", injectedContainers)
	changed = removeNamed(spec, "initContainers", injectedInits) || changed
	if !injected && !changed {
		return
	}
	removeNamed(spec, "volumes", injectedVolumes)
	delete(annotations, sidecarStatusAnnotation)
	labels, _ := meta["labels"].(map[string]any)
	_, byLabel := labels[injectLabel]
	if _, byAnnotation := annotations[injectLabel]; !byLabel && !byAnnotation && meta != nil {
		if annotations == nil {
			annotations = map[string]any{}
			meta["annotations"] = annotations
		}
		annotations[injectLabel] = "true"
	}
	d.reencode()
}

// removeNamed removes from the list field of m the entries whose name is in names, and the
// field when nothing is left; it reports whether it removed any.
func removeNamed(m map[string]any, field string, names []string) bool {
	l, ok := m[field].([]any)
	if !ok {
		return false
	}
	kept := slices.DeleteFunc(slices.Clone(l), func(e any) bool {
		em, _ := e.(map[string]any)
		n, _ := em["name"].(string)
		return slices.Contains(names, n)
	})
	if len(kept) == len(l) {
		return false
	}
	if len(kept) == 0 {
		delete(m, field)
	} else {
		m[field] = kept
	}
	return true
}

// header is what machineryReason reads of a document.
type dumpHeader struct {
	apiVersion, kind, namespace, name, uid string
	labels                                 map[string]any
	owners                                 []any
}

func headerOf(top map[string]any) dumpHeader {
	meta, _ := top["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	h := dumpHeader{apiVersion: str(top, "apiVersion"), kind: str(top, "kind"), namespace: str(meta, "namespace"),
		name: str(meta, "name"), uid: str(meta, "uid")}
	h.labels, _ = meta["labels"].(map[string]any)
	h.owners, _ = meta["ownerReferences"].([]any)
	return h
}

// Namespaces whose objects are the cluster's own machinery, and Istio's install namespace,
// whose objects (istiod, its gateways, their config) a lab replaces with its own.
var (
	machineryNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}
	istioNamespace      = "istio-system"
)

// istioOwn reports whether an object of istio-system is one of Istio's install: istiod's
// and the gateways' Deployments, Services, accounts, config and self-signed CA secret
// are named istio*. Users' gateway credentials and other objects there are kept, and
// so is a plugged-in CA, the Secret cacerts, which the lab's CA signs with as istiod
// does (lab/cacerts.go). The Grafana addon's dashboard ConfigMaps
// (istio-grafana-dashboards, istio-services-grafana-dashboards of samples/addons/grafana.yaml)
// are named istio* too but are no part of the install: kept, the grafana persona reads
// them.
func istioOwn(name string) bool {
	return strings.HasPrefix(name, "istio") && !strings.HasSuffix(name, "-grafana-dashboards")
}

// istioOwnReason is why Istio's own objects (istioOwn) are skipped.
const istioOwnReason = "Istio's own object (istiod, its gateways, their config): the lab runs its own control plane and makes the gateways its Gateways select"

// inertKinds are Kubernetes kinds that change nothing a lab runs, by why: skipped, but
// for storedKinds, which a lab keeps.
var inertKinds = map[string]string{
	"ControllerRevision":             "a StatefulSet's or DaemonSet's history",
	"Lease":                          "a controller's lock",
	"Role":                           "RBAC: a lab has no API clients to authorize",
	"RoleBinding":                    "RBAC: a lab has no API clients to authorize",
	"ClusterRole":                    "RBAC: a lab has no API clients to authorize",
	"ClusterRoleBinding":             "RBAC: a lab has no API clients to authorize",
	"CustomResourceDefinition":       "a schema: meshlab knows the kinds it reads",
	"MutatingWebhookConfiguration":   "an admission webhook: meshlab injects sidecars itself",
	"ValidatingWebhookConfiguration": "an admission webhook: meshlab validates what it loads",
	"PodDisruptionBudget":            "a lab never evicts pods",
	"HorizontalPodAutoscaler":        "a lab's replicas are what the workload says",
	"LimitRange":                     "no container runtime enforces it",
	"ResourceQuota":                  "no container runtime enforces it",
	"PriorityClass":                  "a lab has no scheduler",
	"Node":                           "a lab is one node of its own",
	"APIService":                     "a lab serves no Kubernetes API",
	"StorageClass":                   "a lab has no volumes but Secrets and ConfigMaps",
	"PersistentVolume":               "a lab has no volumes but Secrets and ConfigMaps",
	"PersistentVolumeClaim":          "a lab has no volumes but Secrets and ConfigMaps",
	"CertificateSigningRequest":      "the lab's CA signs its own certificates",
}

// machinery returns, for each document that a cluster's own machinery made or that a lab
// makes itself, why it is skipped ("" for the others). Owners are looked for among all
// docs, so a Pod whose ReplicaSet the input holds is skipped even when that ReplicaSet is
// itself skipped for its Deployment.
func machinery(docs []document) []string {
	type key struct{ kind, namespace, name string }
	held := map[key]bool{}
	uids := map[string]bool{}
	heads := make([]dumpHeader, len(docs))
	for i, d := range docs {
		if d.top == nil {
			continue
		}
		h := headerOf(d.top)
		h.namespace = cmp.Or(h.namespace, DefaultNamespace)
		heads[i] = h
		held[key{h.kind, h.namespace, h.name}] = true
		if h.uid != "" {
			uids[h.uid] = true
		}
	}
	reasons := make([]string, len(docs))
	for i, d := range docs {
		if d.top == nil || IsLabDocument(heads[i].apiVersion, heads[i].kind) {
			continue
		}
		h := heads[i]
		for _, o := range h.owners {
			ref, _ := o.(map[string]any)
			kind, _ := ref["kind"].(string)
			name, _ := ref["name"].(string)
			uid, _ := ref["uid"].(string)
			if ctl, _ := ref["controller"].(bool); ctl && (held[key{kind, h.namespace, name}] || (uid != "" && uids[uid])) {
				reasons[i] = fmt.Sprintf("made by %s %s/%s, which this input holds", kind, h.namespace, name)
			}
		}
		if reasons[i] == "" {
			reasons[i] = machineryReason(h)
		}
	}
	return reasons
}

// machineryReason says why an object (not made by an owner in the input) is the cluster's
// machinery, or "".
func machineryReason(h dumpHeader) string {
	group, _, _ := strings.Cut(h.apiVersion, "/")
	if !strings.Contains(h.apiVersion, "/") {
		group = ""
	}
	ns := h.namespace
	if h.kind == "Namespace" {
		ns = h.name
	}
	switch {
	case h.kind == "Event":
		return "an event: the cluster's history, not its state"
	case h.kind == "Endpoints" && group == "", h.kind == "EndpointSlice" && group == "discovery.k8s.io":
		return "the lab derives endpoints from its pods and Services"
	case slices.Contains(machineryNamespaces, ns):
		return "namespace " + ns + " is the cluster's own machinery"
	case inertKinds[h.kind] != "" && storedKinds[h.kind] == "" && !strings.HasSuffix(group, "istio.io"):
		return inertKinds[h.kind]
	case storedKinds[h.kind] != "" && (strings.HasPrefix(h.name, "system:") || h.labels["kubernetes.io/bootstrapping"] == "rbac-defaults"):
		return "Kubernetes' own RBAC defaults"
	case storedKinds[h.kind] != "" && clusterScoped[h.kind] && istioOwn(h.name):
		return istioOwnReason
	case h.kind == "Service" && h.namespace == DefaultNamespace && h.name == "kubernetes":
		return "the Kubernetes API server's own Service"
	case h.kind == "ConfigMap" && h.name == "kube-root-ca.crt":
		return "Kubernetes writes it into every namespace"
	case h.kind == "ConfigMap" && h.name == "istio-ca-root-cert":
		return "istiod writes it into every namespace; the lab's CA is its own"
	case h.kind == "ServiceAccount" && h.name == "default":
		return "Kubernetes makes it in every namespace"
	case h.namespace == istioNamespace && istioOwn(h.name) && h.kind != "Namespace" && !strings.HasSuffix(group, "istio.io") && group != "meshlab.dev" && group != gatewayAPIGroup:
		// A Gateway API object is the user's wherever it is: the secure-metrics page
		// makes a Gateway istio-system/istio-ingressgateway beside istioctl's gateway.
		return istioOwnReason
	}
	for _, l := range []string{"istio", "app"} {
		v, _ := h.labels[l].(string)
		if (v == "ingressgateway" || v == "egressgateway" || v == "istio-ingressgateway" || v == "istio-egressgateway") && kubeWorkloadKinds[h.kind] != "" {
			return "an Istio gateway's own " + h.kind + ": the lab makes the gateways its Gateways select"
		}
	}
	return ""
}

// skipMachinery takes out of docs the objects machinery names and returns them as
// skipped Changes, in input order.
func skipMachinery(docs []document) ([]document, []Change) {
	reasons := machinery(docs)
	var kept []document
	var skipped []Change
	for i, d := range docs {
		if reasons[i] == "" {
			kept = append(kept, d)
			continue
		}
		h := headerOf(d.top)
		skipped = append(skipped, Change{Ref: Ref{Kind: h.kind, Namespace: cmp.Or(h.namespace, DefaultNamespace), Name: h.name}, Action: ActionSkipped, Reason: reasons[i]})
	}
	return kept, skipped
}

// RawObject is one object of a file as the loader reads it, before decoding: a document,
// or an item of a List document.
type RawObject struct {
	// Doc is the 1-based index of its document; Item its 1-based index in that document's
	// List items (0 when the document is not a List).
	Doc, Item int
	// Data is the object as JSON, or its document's text when that does not parse.
	Data []byte
}

// RawObjects returns the objects of a file as Load reads them (Lists expanded, status
// dropped, injection undone) without what a cluster's own machinery made, which it
// returns as skipped Changes. Documents above the loader's limits are left out.
func RawObjects(file string, data []byte) ([]RawObject, []Change) {
	var errs ErrorList
	docs, skipped := skipMachinery(readDocuments(file, splitDocuments(data), &errs))
	out := make([]RawObject, 0, len(docs))
	for _, d := range docs {
		o := RawObject{Doc: d.index, Item: d.item, Data: d.js}
		if d.top == nil {
			o.Data = d.data
		}
		out = append(out, o)
	}
	return out, skipped
}
