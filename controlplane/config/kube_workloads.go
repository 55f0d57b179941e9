package config

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Kubernetes workloads: Pod, Deployment, ReplicaSet, StatefulSet and DaemonSet make pods
// as a Workload does, so that Istio's sample manifests load unchanged. There is no
// container runtime: the first container's image selects what runs (appForImage), its
// containerPorts are the ports the app listens on, and the fields that only a container
// runtime or a scheduler acts on (resources, volumes, probes, security contexts, pull
// policy, affinity...) are accepted without effect. Fields that would change what the pod
// is on the network are refused by name.

// Kubernetes workload kinds and their API versions.
const (
	appsAPIVersion = "apps/v1"
	coreAPIVersion = "v1"
)

// kubeWorkloadKinds are the kinds that make pods from a template, by API version.
var kubeWorkloadKinds = map[string]string{
	"Pod":         coreAPIVersion,
	"Deployment":  appsAPIVersion,
	"ReplicaSet":  appsAPIVersion,
	"StatefulSet": appsAPIVersion,
	"DaemonSet":   appsAPIVersion,
}

// Istio's injection switches (pkg/kube/inject): the pod label or annotation
// sidecar.istio.io/inject, and the namespace labels istio-injection and istio.io/rev.
const (
	injectLabel = "sidecar.istio.io/inject"
	// templatesAnnotation names the injection templates; grpc-agent is proxyless gRPC.
	templatesAnnotation  = "inject.istio.io/templates"
	namespaceInjectLabel = "istio-injection"
	revisionLabel        = "istio.io/rev"
)

// kubeWorkload is what a Kubernetes workload object contributes: its pod template and the
// pods made from it.
type kubeWorkload struct {
	// template is the pods' template (a Pod's own metadata and spec).
	template *corev1.PodTemplateSpec
	// inject is the pod-level injection choice (label, else annotation), nil when unset.
	inject *bool
}

// decodeKubeWorkload decodes a Pod, Deployment, ReplicaSet, StatefulSet or DaemonSet
// strictly into its Kubernetes type and returns its pods (without addresses), or nil after
// recording its problems.
func decodeKubeWorkload(kind string, top map[string]any, js []byte, o *Object, p problems) []*model.Pod {
	var (
		tmpl     corev1.PodTemplateSpec
		replicas = 1
		names    func(hash string) []string
		selector map[string]string
		prefix   = "spec.template."
	)
	name := o.Origin.Name
	var owner metav1.ObjectMeta // a workload's own metadata (a Pod has none apart from its template's)
	switch kind {
	case "Pod":
		var pod corev1.Pod
		if !decodeStrict(top, js, &pod, p) {
			return nil
		}
		tmpl = corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
		prefix = ""
		names = func(string) []string { return []string{name} }
	case "Deployment":
		var d appsv1.Deployment
		if !decodeStrict(top, js, &d, p) {
			return nil
		}
		owner, tmpl, selector = d.ObjectMeta, d.Spec.Template, labelSelector(d.Spec.Selector, p)
		replicas = replicaCount(d.Spec.Replicas, p)
		names = func(hash string) []string {
			return suffixedNamesAfter(name+"-"+hash, replicas, deletedPods(d.Annotations, p))
		}
	case "ReplicaSet":
		var rs appsv1.ReplicaSet
		if !decodeStrict(top, js, &rs, p) {
			return nil
		}
		owner, tmpl, selector = rs.ObjectMeta, rs.Spec.Template, labelSelector(rs.Spec.Selector, p)
		replicas = replicaCount(rs.Spec.Replicas, p)
		names = func(string) []string { return suffixedNamesAfter(name, replicas, deletedPods(rs.Annotations, p)) }
	case "StatefulSet":
		var ss appsv1.StatefulSet
		if !decodeStrict(top, js, &ss, p) {
			return nil
		}
		owner, tmpl, selector = ss.ObjectMeta, ss.Spec.Template, labelSelector(ss.Spec.Selector, p)
		replicas = replicaCount(ss.Spec.Replicas, p)
		names = func(string) []string { return ordinalNames(name, replicas) }
	case "DaemonSet":
		var ds appsv1.DaemonSet
		if !decodeStrict(top, js, &ds, p) {
			return nil
		}
		// A lab is one node: a DaemonSet makes one pod.
		owner, tmpl, selector = ds.ObjectMeta, ds.Spec.Template, labelSelector(ds.Spec.Selector, p)
		names = func(string) []string { return suffixedNamesAfter(name, 1, deletedPods(ds.Annotations, p)) }
	}
	n := len(*p.list)
	checkName(p, "metadata.name", name, 63)
	checkName(p, "metadata.namespace", p.origin.Namespace, 63)
	if kind != "Pod" {
		if len(selector) == 0 && len(*p.list) == n {
			p.addf("spec.selector.matchLabels", "is required")
		}
		for k, v := range selector {
			if tmpl.Labels[k] != v {
				p.addf("spec.selector", "does not match spec.template.metadata.labels (%s=%s): Kubernetes refuses such a %s", k, v, kind)
				break
			}
		}
	}
	app, ports, sa := podTemplateApp(&tmpl, prefix, p)
	prometheusAppMetrics(tmpl.Annotations, prefix+"metadata.annotations", p) // checked here, used by injectPods
	checkProxyConfigAnnotation(tmpl.Annotations, prefix+"metadata.annotations", p)
	if _, _, err := sidecarUserVolumes(tmpl.Annotations, tmpl.Spec.Volumes); err != nil { // volumes.go: used by mountVolumes
		p.addf(prefix+"metadata.annotations", "%v", err)
	}
	checkUseWaypoint(tmpl.Labels, prefix+"metadata.labels", p) // waypoint.go
	podLabels := podLabelOverlay(owner.Annotations, p)
	hash := podTemplateHash(&tmpl)
	podNames := names(hash)
	for _, pn := range podNames {
		if len(pn) > maxPodName {
			p.addf("metadata.name", "pod name %q is %d characters, more than %d (each pod is a network namespace ml-<lab>-<pod>)", pn, len(pn), maxPodName)
			break
		}
	}
	if len(*p.list) > n {
		return nil
	}
	kw := &kubeWorkload{template: &tmpl, inject: injectChoice(tmpl.ObjectMeta)}
	o.kube = kw
	labels := maps.Clone(tmpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if kind == "Deployment" {
		labels["pod-template-hash"] = hash
	}
	pods := make([]*model.Pod, 0, len(podNames))
	for _, pn := range podNames {
		pl := maps.Clone(labels)
		if kind == "StatefulSet" {
			pl["statefulset.kubernetes.io/pod-name"] = pn
		}
		if own, ok := podLabels[pn]; ok {
			pl = maps.Clone(own)
		}
		pods = append(pods, &model.Pod{
			Name:           pn,
			Namespace:      p.origin.Namespace,
			Workload:       name,
			Labels:         pl,
			Annotations:    maps.Clone(tmpl.Annotations),
			ServiceAccount: sa,
			Ports:          slices.Clone(ports),
			App:            app,
			// Injection also depends on the namespace's labels, which another document may
			// hold: Build decides it (injectPods); this is the pod's own choice or true.
			Sidecar: model.SidecarSpec{Inject: kw.inject == nil || *kw.inject},
			Origin:  p.origin,
		})
	}
	return pods
}

// deletedPods reads a workload's model.AnnotationDeletedPods: the names of its pods that
// were deleted (a JSON list), whose successors have names of their own.
func deletedPods(annotations map[string]string, p problems) map[string]bool {
	v, ok := annotations[model.AnnotationDeletedPods]
	if !ok {
		return nil
	}
	var names []string
	if err := json.Unmarshal([]byte(v), &names); err != nil {
		p.addf("metadata.annotations."+model.AnnotationDeletedPods, "is not a JSON list of pod names: %v", err)
		return nil
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// podLabelOverlay reads a workload's model.AnnotationPodLabels: the labels of the pods
// labelled one by one, by pod name, each checked as a pod's labels are.
func podLabelOverlay(annotations map[string]string, p problems) map[string]map[string]string {
	v, ok := annotations[model.AnnotationPodLabels]
	if !ok {
		return nil
	}
	field := "metadata.annotations." + model.AnnotationPodLabels
	var out map[string]map[string]string
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		p.addf(field, "is not a JSON object of pod names to labels: %v", err)
		return nil
	}
	for pod, labels := range out {
		for k, v := range labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				p.addf(field, "pod %s: label key %q: %s", pod, k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				p.addf(field, "pod %s: label %s=%q: %s", pod, k, v, strings.Join(errs, "; "))
			}
		}
		checkUseWaypoint(labels, field+"."+pod, p)
	}
	return out
}

// podTemplateApp reads what runs in the template's pods: the app (by the first container's
// image), its ports and the service account. prefix is the path of the template in the
// object ("spec.template." or "" for a Pod).
func podTemplateApp(t *corev1.PodTemplateSpec, prefix string, p problems) (model.AppSpec, []uint16, string) {
	spec := &t.Spec
	field := prefix + "spec."
	if spec.HostNetwork {
		p.addf(field+"hostNetwork", "is not supported: every meshlab pod has its own network namespace")
	}
	if spec.HostPID || spec.HostIPC {
		p.addf(field+"hostPID", "hostPID and hostIPC are not supported: pods are isolated from the host")
	}
	if len(spec.Containers) == 0 {
		p.addf(field+"containers", "is required (one container)")
		return model.AppSpec{}, nil, ""
	}
	if len(spec.InitContainers) > 0 {
		p.addf(field+"initContainers", "is not supported (no container runtime; the sidecar's init is meshlab's own)")
	}
	main := mainContainer(spec)
	c := &spec.Containers[main]
	var ports []uint16
	var udpTwins []string
	seen := map[int32]bool{}
	for ci := range spec.Containers {
		cf := fmt.Sprintf("%scontainers[%d]", field, ci)
		if spec.Containers[ci].Image == "" {
			p.addf(cf+".image", "is required")
		}
		for i, cp := range spec.Containers[ci].Ports {
			pf := fmt.Sprintf("%s.ports[%d]", cf, i)
			if msg := checkAppPort(int64(cp.ContainerPort)); msg != "" {
				p.addf(pf+".containerPort", "%s", msg)
				continue
			}
			if cp.Protocol == corev1.ProtocolUDP && slices.ContainsFunc(spec.Containers[ci].Ports, func(o corev1.ContainerPort) bool {
				return o.ContainerPort == cp.ContainerPort && (o.Protocol == "" || o.Protocol == corev1.ProtocolTCP)
			}) {
				// A port declared for TCP and UDP (grafana.yaml's gossip 9094): its TCP
				// half is served; a containerPort opens nothing in Kubernetes either.
				udpTwins = append(udpTwins, fmt.Sprintf("%d/UDP", cp.ContainerPort))
				continue
			}
			if cp.Protocol != "" && cp.Protocol != corev1.ProtocolTCP {
				p.addf(pf+".protocol", "%s is not supported (meshlab's apps serve TCP)", cp.Protocol)
				continue
			}
			if cp.HostPort != 0 {
				p.addf(pf+".hostPort", "is not supported: nothing of a lab is reachable from the host's network")
			}
			if !seen[cp.ContainerPort] {
				seen[cp.ContainerPort] = true
				ports = append(ports, uint16(cp.ContainerPort))
			}
		}
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa == "" {
		sa = "default"
	}
	checkName(p, field+"serviceAccountName", sa, 63)
	app := appForImage(c, len(ports) > 0)
	if len(udpTwins) > 0 {
		app.ImageNote = strings.TrimPrefix(app.ImageNote+"; containerPort "+strings.Join(udpTwins, ", ")+" is declared, not served: meshlab's apps serve TCP (the port's TCP half is served)", "; ")
	}
	for i := range spec.Containers {
		if i != main {
			app.ImageNote = strings.TrimPrefix(app.ImageNote+"; "+fmt.Sprintf("container %s (image %s) is a helper meshlab does not run: a lab pod runs one app, that of container %s", spec.Containers[i].Name, spec.Containers[i].Image, c.Name), "; ")
		}
	}
	return app, ports, sa
}

// helperImages are the images Istio's samples run beside a pod's app (addons' config
// reloaders), never the container whose app a pod runs.
var helperImages = map[string]bool{
	"prometheus-operator/prometheus-config-reloader": true,
	"jimmidyson/configmap-reload":                    true,
	"kiwigrid/k8s-sidecar":                           true,
}

// mainContainer returns the index of the container whose app a pod runs: the first whose
// image has a persona, else the first that is not a known helper, else the first. A
// sample's other containers are helpers (Prometheus' config reloader beside
// prometheus-server): accepted, described, not run, and their ports are the pod's ports
// all the same.
func mainContainer(spec *corev1.PodSpec) int {
	for i := range spec.Containers {
		if imagePersonas[imageRepository(spec.Containers[i].Image)] != "" {
			return i
		}
	}
	for i := range spec.Containers {
		if !helperImages[imageRepository(spec.Containers[i].Image)] {
			return i
		}
	}
	return 0
}

// Personas of the built-in app, chosen by image (the names demoapp.Personas lists; the lab
// checks them when it starts an app).
const (
	personaHTTPBin   = "httpbin"
	personaGoHTTPBin = "go-httpbin" // the image Istio's samples/httpbin runs today
	personaSleep     = "sleep"
	// personaPrometheus is not a built-in app: the lab runs Debian's prometheus with the
	// container's args and its ConfigMap volume (lab/promserver).
	personaPrometheus = "prometheus"
)

// imagePersonas maps an image repository (registry and tag removed) to the built-in app
// persona that answers as that image does.
var imagePersonas = map[string]string{
	"kong/httpbin":            personaHTTPBin,
	"mccutchen/go-httpbin":    personaGoHTTPBin,
	"kennethreitz/httpbin":    personaHTTPBin,
	"citizenstig/httpbin":     personaHTTPBin,
	"curlimages/curl":         personaSleep,
	"governmentpaas/curl-ssl": personaSleep,
	"nicolaka/netshoot":       personaSleep,
	"library/busybox":         personaSleep,
	"busybox":                 personaSleep,
	"library/alpine":          personaSleep,
	"alpine":                  personaSleep,
	"pstauffer/curl":          personaSleep,
	"istio/base":              personaSleep,

	"istio/examples-bookinfo-productpage-v1":         "bookinfo-productpage",
	"istio/examples-bookinfo-productpage-v-flooding": "bookinfo-productpage",
	"istio/examples-bookinfo-details-v1":             "bookinfo-details",
	"istio/examples-bookinfo-details-v2":             "bookinfo-details",
	"istio/examples-bookinfo-reviews-v1":             "bookinfo-reviews-v1",
	"istio/examples-bookinfo-reviews-v2":             "bookinfo-reviews-v2",
	"istio/examples-bookinfo-reviews-v3":             "bookinfo-reviews-v3",
	"istio/examples-bookinfo-ratings-v1":             "bookinfo-ratings",
	"istio/examples-bookinfo-ratings-v2":             "bookinfo-ratings", // its database is not run: it answers as v1
	"istio/examples-helloworld-v1":                   "helloworld",
	"istio/examples-helloworld-v2":                   "helloworld",
	"istio/tcp-echo-server":                          "tcp-echo",
	"fortio/fortio":                                  "fortio",
	"istio-testing/app":                              "grpc-echo", // Istio's echo app, as its proxyless gRPC examples run it
	"istio/app":                                      "grpc-echo",
	"istio-release/app":                              "grpc-echo",
	"prom/prometheus":                                personaPrometheus,
	"otel/opentelemetry-collector-contrib":           "opentelemetry-collector", // samples/open-telemetry/otel.yaml
	"otel/opentelemetry-collector":                   "opentelemetry-collector",
	"openzipkin/zipkin":                              "zipkin", // demoapp/tracestore.go: the tracing addons' span stores
	"openzipkin/zipkin-slim":                         "zipkin",
	"jaegertracing/jaeger":                           "jaeger",
	"jaegertracing/all-in-one":                       "jaeger",
	"grafana/grafana":                                "grafana",
	"kiali/kiali":                                    "kiali", // demoapp/kiali.go: Kiali's graph API over the lab's Prometheus
	"nginx":                                          "nginx", // demoapp/nginx.go: TLS on every port
	"library/nginx":                                  "nginx",
	"sameersbn/squid":                                "squid", // demoapp/squid.go: the http-proxy task's forward proxy
}

// istioRegistry is the registry Istio's samples name today; its release/ and testing/
// repositories are Docker Hub's istio/ and istio-testing/ ones
// (registry.istio.io/release/examples-bookinfo-details-v1 is docker.io/istio/examples-bookinfo-details-v1).
const istioRegistry = "registry.istio.io"

// imageRepository strips an image reference's registry host, tag and digest:
// "docker.io/kong/httpbin:0.1.0" -> "kong/httpbin"; Istio's registry's repositories are
// named as on Docker Hub: "registry.istio.io/release/tcp-echo-server:1.3" ->
// "istio/tcp-echo-server".
func imageRepository(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	if first, rest, ok := strings.Cut(ref, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		ref = rest
		if first == istioRegistry {
			if r, ok := strings.CutPrefix(rest, "release/"); ok {
				ref = "istio/" + r
			} else if r, ok := strings.CutPrefix(rest, "testing/"); ok {
				ref = "istio-testing/" + r
			}
		}
	}
	return ref
}

// appForImage returns what runs for container c: the persona its image names, the sleep
// persona for a container whose command is sleep (a pod to exec into), else the demo app.
// hasPorts says whether the container declares ports; a pod of an unknown image without
// ports sleeps, as there is nothing to serve.
func appForImage(c *corev1.Container, hasPorts bool) model.AppSpec {
	app := model.AppSpec{Image: c.Image}
	if len(c.Args) > 0 {
		app.Args = slices.Clone(c.Args)
	}
	persona, known := imagePersonas[imageRepository(c.Image)]
	if len(c.Command) > 0 && strings.HasSuffix(c.Command[0], "sleep") {
		persona, known = personaSleep, true
	}
	switch {
	case known && persona != "":
		app.Persona = persona
	case !hasPorts:
		app.Persona = personaSleep
		app.ImageNote = fmt.Sprintf("image %s is not one meshlab knows and declares no port: the pod runs nothing but is there to exec into", c.Image)
	default:
		app.ImageNote = fmt.Sprintf("image %s is not one meshlab knows: the pod runs meshlab's demo app on its container ports", c.Image)
	}
	return app
}

// injectChoice is the pod's own sidecar.istio.io/inject choice: the label, else the
// annotation (Istio reads both; the label wins), nil when neither is set.
func injectChoice(meta metav1.ObjectMeta) *bool {
	v, ok := meta.Labels[injectLabel]
	if !ok {
		v, ok = meta.Annotations[injectLabel]
	}
	if !ok {
		return nil
	}
	b := strings.EqualFold(v, "true") || v == "y" || v == "yes" || v == "on"
	return &b
}

// grpcAgentTemplate reports whether annotations select Istio's grpc-agent injection
// template (inject.istio.io/templates, a comma-separated list).
func grpcAgentTemplate(annotations map[string]string) bool {
	for t := range strings.SplitSeq(annotations[templatesAnnotation], ",") {
		if strings.TrimSpace(t) == "grpc-agent" {
			return true
		}
	}
	return false
}

// namespaceInjects reports whether pods of namespace ns get a sidecar by default, from the
// scenario's Namespace objects: the istio-injection label (enabled/disabled) or an
// istio.io/rev label decide, as Istio's injector does; a declared Namespace without them
// gets none. A namespace no object declares is taken as labelled istio-injection=enabled:
// a lab is a mesh, and Istio's docs label the namespaces they use.
func namespaceInjects(ns string, objs []*Object) bool {
	for _, o := range objs {
		if o.KubeNamespace == nil || o.Origin.Name != ns {
			continue
		}
		switch o.KubeNamespace.Labels[namespaceInjectLabel] {
		case "enabled":
			return true
		case "disabled":
			return false
		}
		_, rev := o.KubeNamespace.Labels[revisionLabel]
		return rev
	}
	return true
}

// injectPods sets the sidecar choice of the pods made by Kubernetes workloads, once every
// object is known: the pod's own label or annotation, else the choice a running pod of
// that name was made with (injected: the injector acts when a pod is created, so a
// namespace labelled since changes only the pods made after), else its namespace's
// labels.
func injectPods(objs []*Object, pods []*model.Pod, injected map[PodKey]bool) {
	// By namespace and name: two namespaces may each have a pod of one name.
	byKey := map[PodKey]*Object{}
	mesh := meshProxyMetadata(objs)
	for _, o := range objs {
		if o.kube != nil {
			for _, p := range o.pods {
				byKey[PodKey{p.Namespace, p.Name}] = o
			}
		}
	}
	for _, p := range pods {
		o := byKey[PodKey{p.Namespace, p.Name}]
		if o == nil || o.Origin.Namespace != p.Namespace {
			continue
		}
		kept, running := injected[PodKey{p.Namespace, p.Name}]
		switch {
		case o.kube.inject != nil:
			p.Sidecar.Inject = *o.kube.inject
		case running:
			p.Sidecar.Inject = kept
		default:
			p.Sidecar.Inject = namespaceInjects(p.Namespace, objs)
		}
		p.Sidecar.GRPCAgent = p.Sidecar.Inject && grpcAgentTemplate(o.kube.template.Annotations)
		if p.Sidecar.Inject {
			p.Sidecar.AppMetricsPort, p.Sidecar.AppMetricsPath = prometheusAppMetrics(o.kube.template.Annotations, "", problems{list: new(ErrorList)})
			// The mesh's defaultConfig.proxyMetadata under the pod's own (proxymetadata.go).
			applyProxyMetadata(p, mergeProxyMetadata(mesh, proxyMetadata(o.kube.template.Annotations)))
			// The tracing of the pod's proxy.istio.io/config (proxyconfig_tracing.go).
			p.Sidecar.Tracing = proxyConfigTracing(o.kube.template.Annotations)
		}
	}
}

// The prometheus.io annotations of a pod template: with a sidecar, Istio's injector
// points them at pilot-agent's merged metrics and hands the app's own port and path to the
// agent (ISTIO_PROMETHEUS_ANNOTATIONS), which scrapes them with the proxy's. scrape:
// "false" opts out; without a port there is nothing of the app's to scrape.
const (
	prometheusScrapeAnnotation = "prometheus.io/scrape"
	prometheusPortAnnotation   = "prometheus.io/port"
	prometheusPathAnnotation   = "prometheus.io/path"
)

// prometheusAppMetrics returns the app's metrics port and path from annotations (0 when
// none), reporting a port that is not one under field.
func prometheusAppMetrics(annotations map[string]string, field string, p problems) (uint16, string) {
	if strings.EqualFold(annotations[prometheusScrapeAnnotation], "false") {
		return 0, ""
	}
	v, ok := annotations[prometheusPortAnnotation]
	if !ok {
		return 0, ""
	}
	port, err := strconv.ParseUint(v, 10, 16)
	if err != nil || port == 0 {
		p.addf(field+"["+prometheusPortAnnotation+"]", "%q is not a port (1-65535)", v)
		return 0, ""
	}
	return uint16(port), annotations[prometheusPathAnnotation]
}

func replicaCount(r *int32, p problems) int {
	if r == nil {
		return 1
	}
	if *r < 0 || *r > maxReplicas {
		p.addf("spec.replicas", "%d is out of range 0-%d", *r, maxReplicas)
		return 0
	}
	return int(*r)
}

// labelSelector returns a workload's matchLabels, refusing matchExpressions (which no
// sample uses and meshlab does not evaluate).
func labelSelector(s *metav1.LabelSelector, p problems) map[string]string {
	if s == nil {
		return nil
	}
	if len(s.MatchExpressions) > 0 {
		p.addf("spec.selector.matchExpressions", "is not supported (use matchLabels)")
	}
	return s.MatchLabels
}

// podNameAlphabet is Kubernetes' alphabet for generated names (no vowels, no look-alikes).
const podNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// safeEncode renders v's decimal digits in podNameAlphabet, as Kubernetes'
// rand.SafeEncodeString renders a pod-template-hash.
func safeEncode(v uint32) string {
	s := strconv.FormatUint(uint64(v), 10)
	b := make([]byte, len(s))
	for i := range len(s) {
		b[i] = podNameAlphabet[int(s[i])%len(podNameAlphabet)]
	}
	return string(b)
}

// podTemplateHash is the template's pod-template-hash (an FNV-32a of its JSON rendered as
// Kubernetes renders it): a changed template gives new pod names.
func podTemplateHash(t *corev1.PodTemplateSpec) string {
	js, _ := json.Marshal(t)
	h := fnv.New32a()
	_, _ = h.Write(js)
	return safeEncode(h.Sum32())
}

// suffixedNames returns n names base-<5 characters>, as a ReplicaSet names its pods; the
// suffixes are drawn from base and the index, so the same scenario gives the same names.
// The same Deployment in two namespaces (the mtls-migration task's httpbin and curl in
// foo, bar and legacy) makes pods of the same names, which Kubernetes allows: a pod is
// keyed by namespace and name (model.PodKey).
func suffixedNames(base string, n int) []string {
	return suffixedNamesAfter(base, n, nil)
}

// suffixedNamesAfter is suffixedNames for a workload some of whose pods were deleted
// (model.AnnotationDeletedPods): a deleted pod's successor, as the ReplicaSet's new pod,
// has a name of its own, the next of its slot's names that was not deleted.
func suffixedNamesAfter(base string, n int, deleted map[string]bool) []string {
	out := make([]string, 0, n)
	for i := range n {
		for gen := 0; ; gen++ {
			h := fnv.New32a()
			if gen == 0 {
				_, _ = fmt.Fprintf(h, "%s/%d", base, i)
			} else {
				_, _ = fmt.Fprintf(h, "%s/%d/%d", base, i, gen)
			}
			// The low digits vary most; five of them, as Kubernetes' random suffix.
			suffix := safeEncode(h.Sum32() | 1<<31) // at least 10 digits
			if name := base + "-" + suffix[len(suffix)-5:]; !deleted[name] || gen > len(deleted) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// ordinalNames returns a StatefulSet's pod names: base-0 ... base-<n-1>.
func ordinalNames(base string, n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, base+"-"+strconv.Itoa(i))
	}
	return out
}

// validateNamespace checks a Namespace object.
func validateNamespace(ns *corev1.Namespace, p problems) {
	checkName(p, "metadata.name", ns.Name, 63)
	if ns.Namespace != "" {
		p.addf("metadata.namespace", "must not be set: a Namespace is not namespaced")
	}
	if v, ok := ns.Labels[namespaceInjectLabel]; ok && v != "enabled" && v != "disabled" {
		p.addf("metadata.labels."+namespaceInjectLabel, "%q is neither enabled nor disabled", v)
	}
	checkUseWaypoint(ns.Labels, "metadata.labels", p) // waypoint.go
}

// namespacesOf returns the scenario's declared namespaces with their metadata, sorted by
// name, as the model holds them.
func namespacesOf(objs []*Object) []*model.Namespace {
	var out []*model.Namespace
	for _, o := range objs {
		if o.KubeNamespace == nil {
			continue
		}
		out = append(out, &model.Namespace{
			Name:        o.Origin.Name,
			Labels:      maps.Clone(o.KubeNamespace.Labels),
			Annotations: maps.Clone(o.KubeNamespace.Annotations),
		})
	}
	slices.SortFunc(out, func(a, b *model.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b *model.Namespace) bool { return a.Name == b.Name })
}

// validateServiceAccount checks a ServiceAccount object: its name is an identity
// (spiffe://<trust domain>/ns/<ns>/sa/<name>).
func validateServiceAccount(sa *corev1.ServiceAccount, p problems) {
	checkName(p, "metadata.name", sa.Name, 63)
	checkName(p, "metadata.namespace", p.origin.Namespace, 63)
}
