package promserver

import (
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"

	"github.com/meshlab/meshlab/controlplane/kubeobj"
	"github.com/meshlab/meshlab/controlplane/model"
)

// Pod is a lab pod as Kubernetes discovery's pod role sees it.
type Pod struct {
	Name, Namespace string
	IP              netip.Addr
	Node            string
	Labels          map[string]string
	Annotations     map[string]string
	Containers      []Container
	Ready           bool
	Controller      string // the owner's kind ("ReplicaSet", "DaemonSet"), "" for none
	ControllerName  string
}

// Container is one of a pod's containers and the ports it declares.
type Container struct {
	Name  string
	Image string
	Ports []uint16
}

// Istio's injector points Prometheus at the agent's merged metrics on every pod it
// injects (and its gateway and waypoint templates carry the same annotations).
var injectedAnnotations = map[string]string{
	"prometheus.io/scrape": "true",
	"prometheus.io/port":   "15020",
	"prometheus.io/path":   "/stats/prometheus",
}

// FromModel is the pod as the API server would hold it for the lab's pod p: its labels
// as Istio's injector leaves them, its annotations with the injector's prometheus.io
// ones when an agent runs in it (a sidecar, a gateway or a waypoint), its app container
// and the istio-proxy container (15090, http-envoy-prom) of a sidecar.
func FromModel(p *model.Pod, node string, ready bool) Pod {
	out := Pod{Name: p.Name, Namespace: p.Namespace, IP: p.IP, Node: node, Ready: ready,
		Labels: kubeobj.PodLabels(p), Annotations: maps.Clone(p.Annotations)}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	agent := p.Sidecar.Inject || p.Router
	if agent {
		maps.Copy(out.Annotations, injectedAnnotations)
	}
	if !p.Router {
		out.Containers = append(out.Containers, Container{Name: p.Workload, Image: p.App.Image, Ports: slices.Clone(p.Ports)})
	}
	if agent {
		out.Containers = append(out.Containers, Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2", Ports: []uint16{15090}})
	}
	if p.Origin.Kind == "Deployment" {
		out.Controller, out.ControllerName = "ReplicaSet", p.Workload
	}
	return out
}

// PodTargets are the pod role's targets, as Kubernetes discovery makes them: one per
// declared container port (address IP:port), one per container without ports (the IP
// alone), each with the pod's __meta_kubernetes_* labels. A pod without an IP has none.
func PodTargets(pods []Pod) []TargetGroup {
	var out []TargetGroup
	for _, p := range pods {
		if !p.IP.IsValid() {
			continue
		}
		base := podMeta(p)
		for _, c := range p.Containers {
			cl := maps.Clone(base)
			cl["__meta_kubernetes_pod_container_name"] = c.Name
			cl["__meta_kubernetes_pod_container_image"] = c.Image
			cl["__meta_kubernetes_pod_container_init"] = "false"
			if len(c.Ports) == 0 {
				out = append(out, TargetGroup{Targets: []string{p.IP.String()}, Labels: cl})
				continue
			}
			for _, port := range c.Ports {
				l := maps.Clone(cl)
				l["__meta_kubernetes_pod_container_port_number"] = strconv.Itoa(int(port))
				l["__meta_kubernetes_pod_container_port_protocol"] = "TCP"
				if c.Name == "istio-proxy" && port == 15090 {
					l["__meta_kubernetes_pod_container_port_name"] = "http-envoy-prom"
				}
				out = append(out, TargetGroup{Targets: []string{netip.AddrPortFrom(p.IP, port).String()}, Labels: l})
			}
		}
	}
	return out
}

// podMeta is the labels every target of pod p carries.
func podMeta(p Pod) map[string]string {
	ready := "false"
	if p.Ready {
		ready = "true"
	}
	m := map[string]string{
		"__meta_kubernetes_namespace":           p.Namespace,
		"__meta_kubernetes_pod_name":            p.Name,
		"__meta_kubernetes_pod_ip":              p.IP.String(),
		"__meta_kubernetes_pod_ready":           ready,
		"__meta_kubernetes_pod_phase":           "Running",
		"__meta_kubernetes_pod_node_name":       p.Node,
		"__meta_kubernetes_pod_host_ip":         "",
		"__meta_kubernetes_pod_uid":             p.Namespace + "/" + p.Name,
		"__meta_kubernetes_pod_controller_kind": p.Controller,
		"__meta_kubernetes_pod_controller_name": p.ControllerName,
	}
	for k, v := range p.Labels {
		m["__meta_kubernetes_pod_label_"+sanitize(k)] = v
		m["__meta_kubernetes_pod_labelpresent_"+sanitize(k)] = "true"
	}
	for k, v := range p.Annotations {
		m["__meta_kubernetes_pod_annotation_"+sanitize(k)] = v
		m["__meta_kubernetes_pod_annotationpresent_"+sanitize(k)] = "true"
	}
	return m
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// sanitize makes a Kubernetes label or annotation key a Prometheus label name's tail, as
// Prometheus' discovery does.
func sanitize(k string) string { return invalidLabelChars.ReplaceAllString(k, "_") }
