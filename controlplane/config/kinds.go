package config

import (
	"slices"
	"sort"
	"strings"
)

// kind is what meshlab does with an object kind.
type kind int

const (
	kindRefused kind = iota // recorded as a problem already
	kindService
	kindWorkload
	kindVirtualService
	kindDestinationRule
	kindServiceEntry
	kindMeshConfig
	kindPeerAuthentication
	kindAuthorizationPolicy
	kindRequestAuthentication
	kindNamespace
	kindServiceAccount
	kindKubeWorkload // Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet
	kindGateway
	kindSecret
	kindConfigMap
	kindGatewayAPI // gateway.networking.k8s.io GatewayClass, Gateway, HTTPRoute, GRPCRoute, TCPRoute, TLSRoute
	kindTelemetry
	kindSidecar
	kindTrafficExtension
	kindStored  // a Kubernetes kind kept as written, changing nothing (storedKinds)
	kindIngress // networking.k8s.io Ingress, IngressClass
)

// Object kinds and API groups meshlab reads.
const (
	serviceAPIVersion  = "v1"
	workloadAPIVersion = "meshlab.dev/v1alpha1"
	// MeshConfig is meshlab's object for the settings Istio keeps in its MeshConfig.
	meshConfigAPIVersion = workloadAPIVersion
)

// istioVersions are the API versions of each Istio group that meshlab reads; the versions
// of one group share one schema.
var istioVersions = map[string][]string{
	"networking.istio.io": {"v1alpha3", "v1beta1", "v1"},
	"security.istio.io":   {"v1beta1", "v1"},
	"telemetry.istio.io":  {"v1alpha1", "v1"},
	"extensions.istio.io": {"v1alpha1"},
}

// implementedIstioKinds are the Istio kinds meshlab reads.
var implementedIstioKinds = map[string]kind{
	"VirtualService":  kindVirtualService,
	"DestinationRule": kindDestinationRule,
	"ServiceEntry":    kindServiceEntry,
	"Gateway":         kindGateway,

	"PeerAuthentication":  kindPeerAuthentication,
	"AuthorizationPolicy": kindAuthorizationPolicy,

	"RequestAuthentication": kindRequestAuthentication,

	"Telemetry": kindTelemetry,

	"Sidecar": kindSidecar,

	"TrafficExtension": kindTrafficExtension,
}

// istioKinds maps each Istio kind to its API group. They are recognised so that a file
// written for a real cluster gets a clear "not supported yet" rather than "unknown kind".
var istioKinds = map[string]string{
	"VirtualService":        "networking.istio.io",
	"DestinationRule":       "networking.istio.io",
	"ServiceEntry":          "networking.istio.io",
	"Gateway":               "networking.istio.io",
	"Sidecar":               "networking.istio.io",
	"WorkloadEntry":         "networking.istio.io",
	"WorkloadGroup":         "networking.istio.io",
	"EnvoyFilter":           "networking.istio.io",
	"ProxyConfig":           "networking.istio.io",
	"PeerAuthentication":    "security.istio.io",
	"AuthorizationPolicy":   "security.istio.io",
	"RequestAuthentication": "security.istio.io",
	"Telemetry":             "telemetry.istio.io",
	"WasmPlugin":            "extensions.istio.io",
	"TrafficExtension":      "extensions.istio.io",
}

// unsupportedIstioKinds say why meshlab refuses an Istio kind it will not build, and
// what to use instead.
var unsupportedIstioKinds = map[string]string{
	"WasmPlugin": "its proxy has no Wasm runtime (Envoy's envoy.wasm) to run the module; a TrafficExtension with spec.lua runs a Lua filter in the same places",
}

// storedKinds are the Kubernetes kinds a lab keeps, shows and deletes as an API server
// does, though they change nothing it runs (why: inertKinds), by their API group: the
// RBAC of Istio's samples and addons, and the disruption budgets and autoscalers of
// installs. Any version of the group is read; the object is kept as written.
var storedKinds = map[string]string{
	"Role":                    "rbac.authorization.k8s.io",
	"RoleBinding":             "rbac.authorization.k8s.io",
	"ClusterRole":             "rbac.authorization.k8s.io",
	"ClusterRoleBinding":      "rbac.authorization.k8s.io",
	"PodDisruptionBudget":     "policy",
	"HorizontalPodAutoscaler": "autoscaling",
}

// StoredKindNote says why a lab keeps objects of kind k without acting on them ("" for a
// kind it acts on), for describe.
func StoredKindNote(k string) string {
	if storedKinds[k] == "" {
		return ""
	}
	return "stored, no effect: " + inertKinds[k]
}

// LabSettingsKind is the kind (meshlab.dev/v1alpha1) of a scenario's settings for the lab
// itself rather than for the mesh (spec.controlPlane: meshlab or istiod), which the lab
// reads when it starts (lab/settings.go).
const LabSettingsKind = "LabSettings"

// IsLabDocument reports whether a document is a `kind: Lab` or `kind: LabSettings`
// (meshlab.dev/v1alpha1): the lab runner (package scenarios/runner) and the lab's start
// read those; scenario loading skips them.
func IsLabDocument(apiVersion, k string) bool {
	return apiVersion == workloadAPIVersion && (k == "Lab" || k == LabSettingsKind)
}

// fixedKinds are the kinds other than Istio's and the pod-making Kubernetes kinds
// (kubeWorkloadKinds) that meshlab reads, each under its one apiVersion.
var fixedKinds = map[string]struct {
	apiVersion string
	kind       kind
}{
	"Service":        {serviceAPIVersion, kindService},
	"Secret":         {coreAPIVersion, kindSecret},
	"ConfigMap":      {coreAPIVersion, kindConfigMap},
	"Namespace":      {coreAPIVersion, kindNamespace},
	"ServiceAccount": {coreAPIVersion, kindServiceAccount},
	"Workload":       {workloadAPIVersion, kindWorkload},
	"MeshConfig":     {meshConfigAPIVersion, kindMeshConfig},
	"Ingress":        {ingressAPIVersion, kindIngress},
	"IngressClass":   {ingressAPIVersion, kindIngress},
}

// fixedKind returns the one apiVersion of kind k (a fixed kind or a Kubernetes kind that
// makes pods) and how it is decoded; kindRefused for any other kind.
func fixedKind(k string) (string, kind) {
	if f, ok := fixedKinds[k]; ok {
		return f.apiVersion, f.kind
	}
	if v := kubeWorkloadKinds[k]; v != "" {
		return v, kindKubeWorkload
	}
	return "", kindRefused
}

// fixedKindOK reports whether k is a kind fixedKind knows.
func fixedKindOK(k string) bool {
	_, kd := fixedKind(k)
	return kd != kindRefused
}

// decoderFor says how to decode an object of the given apiVersion and kind, recording a
// problem (and returning kindRefused) when meshlab does not read it.
func decoderFor(apiVersion, k string, p problems) kind {
	switch {
	case isGatewayAPI(apiVersion):
		return gatewayAPIDecoder(apiVersion, k, p)
	case fixedKindOK(k):
		want, kd := fixedKind(k)
		if apiVersion != want {
			p.addf("apiVersion", "%q is not an apiVersion of kind %s (want %q)", apiVersion, k, want)
			return kindRefused
		}
		return kd
	case storedKinds[k] != "":
		if group := storedKinds[k]; !strings.HasPrefix(apiVersion, group+"/") {
			p.addf("apiVersion", "%q is not an apiVersion of kind %s (want %s/<version>)", apiVersion, k, group)
			return kindRefused
		}
		return kindStored
	case istioKinds[k] != "":
		group := istioKinds[k]
		if !strings.HasPrefix(apiVersion, group+"/") {
			p.addf("apiVersion", "%q is not an apiVersion of kind %s (want %s/<version>)", apiVersion, k, group)
			return kindRefused
		}
		if kd, ok := implementedIstioKinds[k]; ok {
			if v := strings.TrimPrefix(apiVersion, group+"/"); !slices.Contains(istioVersions[group], v) {
				p.addf("apiVersion", "%q: version %s is not one meshlab reads (%s)", apiVersion, v, strings.Join(istioVersions[group], ", "))
				return kindRefused
			}
			return kd
		}
		if why := unsupportedIstioKinds[k]; why != "" {
			p.addf("", "kind %s is not supported by meshlab: %s", k, why)
			return kindRefused
		}
		p.addf("", "kind %s is not supported yet", k)
		return kindRefused
	}
	p.addf("", "unknown kind %q in apiVersion %q (meshlab reads %s)", k, apiVersion, knownKinds())
	return kindRefused
}

// knownKinds lists the kinds meshlab reads, for messages.
func knownKinds() string {
	return "v1 Service, Namespace, ServiceAccount, Secret, ConfigMap and Pod, apps/v1 Deployment, ReplicaSet, StatefulSet and DaemonSet, " + workloadAPIVersion + " Workload and MeshConfig, networking.k8s.io/v1 Ingress and IngressClass, networking.istio.io VirtualService, DestinationRule, ServiceEntry and Gateway, " +
		"security.istio.io PeerAuthentication, AuthorizationPolicy and RequestAuthentication, gateway.networking.k8s.io " + gatewayAPIKindList
}

// istioKindNames returns the recognised Istio kinds, sorted (for docs and tests).
func istioKindNames() []string {
	names := make([]string, 0, len(istioKinds))
	for k := range istioKinds {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
