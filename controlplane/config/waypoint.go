package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Waypoints, as Istio declares them (see model/waypoint.go): a Gateway API Gateway of
// class istio-waypoint with the HBONE listener istioctl waypoint generate writes
// ({name: mesh, port: 15008, protocol: HBONE}), labelled istio.io/waypoint-for. Istio's
// deployment controller (pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go and
// its waypoint template) gives each a ServiceAccount, a Deployment and a Service, all
// named after the Gateway (the waypoint class has no "-istio" suffix): waypointDeployments
// makes the Service and pod the same way.

// hboneProtocol is the Gateway listener protocol of a waypoint.
const hboneProtocol gwv1.ProtocolType = "HBONE"

// isWaypoint reports whether o is a Gateway of class istio-waypoint.
func isWaypoint(o *Object) bool {
	return o.KubeGateway != nil && o.KubeGateway.Spec.GatewayClassName == model.WaypointGatewayClass
}

// validateWaypointClass checks a GatewayClass istio-waypoint: Istio's mesh controller,
// and a valid istio.io/waypoint-for (the class's default for its Gateways).
func validateWaypointClass(gc *gwv1.GatewayClass, p problems) {
	if gc.Spec.ControllerName != model.WaypointController {
		p.addf("spec.controllerName", "%q: the %s GatewayClass is controlled by %q", gc.Spec.ControllerName, model.WaypointGatewayClass, model.WaypointController)
	}
	checkWaypointFor(gc.Labels, p)
}

func checkWaypointFor(labels map[string]string, p problems) {
	if v, ok := labels[model.LabelWaypointFor]; ok && !slices.Contains(model.WaypointForValues, v) {
		p.addf("metadata.labels."+model.LabelWaypointFor, "%q is not a waypoint traffic type (%s)", v, strings.Join(model.WaypointForValues, ", "))
	}
}

// validateWaypoint checks a Gateway of class istio-waypoint: a name its Service can take
// and that istio.io/use-waypoint can name ("none" is reserved), a valid
// istio.io/waypoint-for, and listeners meshlab's waypoint serves: HBONE on 15008 (the
// mesh listener), whose allowedRoutes.namespaces says who may attach.
func validateWaypoint(gw *gwv1.Gateway, p problems) {
	checkName(p, "metadata.name", gw.Name, 63)
	if gw.Name == model.WaypointNone {
		p.addf("metadata.name", "%q is reserved: istio.io/use-waypoint=none opts out of a waypoint, so no object can name this one", gw.Name)
	}
	checkWaypointFor(gw.Labels, p)
	if len(gw.Spec.Listeners) == 0 {
		p.addf("spec.listeners", "a waypoint needs its HBONE listener ({name: %s, port: %d, protocol: HBONE}, as istioctl waypoint generate writes it)", model.WaypointListener, model.WaypointPort)
	}
	for i, l := range gw.Spec.Listeners {
		f := fmt.Sprintf("spec.listeners[%d]", i)
		if msg := checkDNSLabel(string(l.Name), 63); msg != "" {
			p.addf(f+".name", "%s", msg)
		}
		if l.Protocol != hboneProtocol {
			p.addf(f+".protocol", "%q: meshlab's waypoint serves the HBONE listener only (protocol HBONE, port %d)", l.Protocol, model.WaypointPort)
		}
		if l.Port != model.WaypointPort {
			p.addf(f+".port", "%d: a waypoint's HBONE listener is on port %d", l.Port, model.WaypointPort)
		}
		if l.Hostname != nil {
			p.addf(f+".hostname", "is not read on a waypoint's HBONE listener")
		}
		if l.TLS != nil {
			p.addf(f+".tls", "is not read on a waypoint's HBONE listener (HBONE is mTLS with the mesh's certificates)")
		}
		if ar := l.AllowedRoutes; ar != nil {
			if len(ar.Kinds) > 0 {
				p.addf(f+".allowedRoutes.kinds", "is not read on a waypoint's HBONE listener")
			}
			if ns := ar.Namespaces; ns != nil && ns.From != nil {
				switch *ns.From {
				case gwv1.NamespacesFromSame, gwv1.NamespacesFromAll:
					if ns.Selector != nil {
						p.addf(f+".allowedRoutes.namespaces.selector", "is only read with from: Selector (from is %s)", *ns.From)
					}
				case gwv1.NamespacesFromSelector:
					if ns.Selector == nil || len(ns.Selector.MatchLabels) == 0 {
						p.addf(f+".allowedRoutes.namespaces.selector.matchLabels", "is required with from: Selector (meshlab reads matchLabels)")
					}
				default:
					p.addf(f+".allowedRoutes.namespaces.from", "%q is not supported by meshlab (Same, All, Selector)", *ns.From)
				}
			}
		}
	}
	if len(gw.Spec.Listeners) > 1 {
		p.addf("spec.listeners", "%d listeners: meshlab's waypoint has one, the HBONE listener on %d", len(gw.Spec.Listeners), model.WaypointPort)
	}
}

// checkUseWaypoint checks the istio.io/use-waypoint labels of a Namespace, Service,
// ServiceEntry or pod template at field (metadata.labels or spec.template.metadata.labels):
// the waypoint's name and namespace are DNS labels; a namespace without a name is
// meaningless.
func checkUseWaypoint(labels map[string]string, field string, p problems) {
	v, ok := labels[model.LabelUseWaypoint]
	if ok {
		if msg := checkDNSLabel(v, 63); msg != "" {
			p.addf(field+"."+model.LabelUseWaypoint, "%s (a waypoint's name, or none)", msg)
		}
	}
	if ns, has := labels[model.LabelUseWaypointNamespace]; has {
		if msg := checkDNSLabel(ns, 63); msg != "" {
			p.addf(field+"."+model.LabelUseWaypointNamespace, "%s", msg)
		}
		if !ok {
			p.addf(field+"."+model.LabelUseWaypointNamespace, "is only read with %s (it says in which namespace that waypoint is)", model.LabelUseWaypoint)
		}
	}
}

// objectLabels returns the metadata.labels of an object as written.
func objectLabels(o *Object) map[string]string {
	var doc struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if len(o.JSON) == 0 || json.Unmarshal(o.JSON, &doc) != nil {
		return nil
	}
	return doc.Metadata.Labels
}

// objectAnnotations returns the metadata.annotations of an object as written.
func objectAnnotations(o *Object) map[string]string {
	var doc struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if len(o.JSON) == 0 || json.Unmarshal(o.JSON, &doc) != nil {
		return nil
	}
	return doc.Metadata.Annotations
}

// waypointsOf returns the model's waypoints, sorted by namespace then name: for each
// Gateway of class istio-waypoint, its traffic type (the Gateway's istio.io/waypoint-for,
// else the GatewayClass's, else service, as istiod's gatewayToWaypointTransform) and who
// may attach (its HBONE listener's allowedRoutes.namespaces).
func waypointsOf(objs []*Object) []*model.Waypoint {
	classFor := ""
	for _, o := range objs {
		if o.GatewayClass != nil && o.GatewayClass.Name == model.WaypointGatewayClass {
			classFor = o.GatewayClass.Labels[model.LabelWaypointFor]
		}
	}
	var out []*model.Waypoint
	for _, o := range objs {
		if !isWaypoint(o) {
			continue
		}
		gw := o.KubeGateway
		w := &model.Waypoint{
			Name: o.Origin.Name, Namespace: o.Origin.Namespace, Labels: maps.Clone(gw.Labels),
			For: model.WaypointForService, From: string(gwv1.NamespacesFromSame), Origin: o.Origin,
		}
		if classFor != "" {
			w.For = classFor
		}
		if v, ok := gw.Labels[model.LabelWaypointFor]; ok {
			w.For = v
		}
		for _, l := range gw.Spec.Listeners {
			if l.Protocol != hboneProtocol || l.Port != model.WaypointPort {
				continue
			}
			if ar := l.AllowedRoutes; ar != nil && ar.Namespaces != nil {
				w.From = string(ptrOr(ar.Namespaces.From, gwv1.NamespacesFromSame))
				if ar.Namespaces.Selector != nil {
					w.FromSelector = maps.Clone(ar.Namespaces.Selector.MatchLabels)
				}
			}
			break
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *model.Waypoint) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// waypointDeployments returns the Service and pod of each waypoint as Istio's deployment
// controller makes them from its waypoint template: a Deployment, Service and
// ServiceAccount named after the Gateway; the Service with the status port (15021,
// appProtocol tcp) and one port per listener (mesh 15008, appProtocol hbone), selecting
// gateway.networking.k8s.io/gateway-name; the pod labelled with the Gateway's name and
// class, gateway.istio.io/managed, istio.io/dataplane-mode none and its canonical name,
// running the proxy as a waypoint (`pilot-agent proxy waypoint`).
func waypointDeployments(objs []*Object) ([]*model.Service, []*model.Pod, error) {
	var svcs []*model.Service
	var pods []*model.Pod
	for _, o := range objs {
		if !isWaypoint(o) {
			continue
		}
		ns, name := o.Origin.Namespace, o.Origin.Name
		for _, other := range objs {
			if other.Origin.Namespace == ns && other.Origin.Name == name && (other.svc != nil || other.kube != nil || other.Workload != nil) {
				return nil, nil, fmt.Errorf("%s: Istio's deployment controller makes the Service and Deployment %s/%s for waypoint %s/%s; remove this object", other.Origin, ns, name, ns, name)
			}
		}
		svcLabels := map[string]string{model.GatewayAPINameLabel: name, model.LabelGatewayClassName: model.WaypointGatewayClass, model.LabelGatewayManaged: model.ManagedByMeshController}
		ports := []model.ServicePort{
			{Name: "status-port", Port: 15021, TargetPort: 15021, Protocol: model.ProtocolTCP, AppProtocol: "tcp"},
		}
		for _, l := range o.KubeGateway.Spec.Listeners {
			if slices.ContainsFunc(ports, func(sp model.ServicePort) bool { return sp.Port == uint16(l.Port) }) {
				continue
			}
			ports = append(ports, model.ServicePort{Name: string(l.Name), Port: uint16(l.Port), TargetPort: uint16(l.Port), Protocol: model.ProtocolTCP, AppProtocol: strings.ToLower(string(l.Protocol))})
		}
		svcs = append(svcs, &model.Service{
			Name: name, Namespace: ns, Ports: ports, Selector: map[string]string{model.GatewayAPINameLabel: name},
			Labels: svcLabels,
			Origin: model.Origin{File: o.Origin.File, Kind: "Service", Namespace: ns, Name: name},
		})
		labels := map[string]string{
			"sidecar.istio.io/inject":             "false",
			model.LabelDataplaneMode:              model.DataplaneModeNone,
			"service.istio.io/canonical-name":     name,
			"service.istio.io/canonical-revision": "latest",
			model.GatewayAPINameLabel:             name,
			model.LabelGatewayClassName:           model.WaypointGatewayClass,
			model.LabelGatewayManaged:             model.ManagedByMeshController,
		}
		tmpl := &corev1.PodTemplateSpec{}
		tmpl.Labels = labels
		tmpl.Annotations = infrastructureAnnotations(o.KubeGateway) // gatewayapi.go
		tmpl.Spec.ServiceAccountName = name
		tmpl.Spec.Containers = []corev1.Container{{Name: "istio-proxy", Image: proxyImage, Args: []string{"proxy", "waypoint"}}}
		hash := podTemplateHash(tmpl)
		labels = maps.Clone(labels)
		labels["pod-template-hash"] = hash
		annotations := map[string]string{"istio.io/rev": "default", "prometheus.io/path": "/stats/prometheus", "prometheus.io/port": "15020", "prometheus.io/scrape": "true"}
		maps.Copy(annotations, tmpl.Annotations) // the Gateway's infrastructure annotations over the chart's
		pod := &model.Pod{
			Name: suffixedNames(name+"-"+hash, 1)[0], Namespace: ns, Workload: name, Labels: labels,
			Annotations:    annotations,
			ServiceAccount: name,
			App:            model.AppSpec{Image: proxyImage},
			Sidecar:        model.SidecarSpec{Inject: true},
			Router:         true,
			Waypoint:       true,
			Origin:         model.Origin{File: o.Origin.File, Kind: "Deployment", Namespace: ns, Name: name},
		}
		applyProxyMetadata(pod, mergeProxyMetadata(meshProxyMetadata(objs), proxyMetadata(tmpl.Annotations))) // proxymetadata.go
		pod.Sidecar.Tracing = proxyConfigTracing(tmpl.Annotations)                                            // proxyconfig_tracing.go
		pods = append(pods, pod)
	}
	return svcs, pods, nil
}
