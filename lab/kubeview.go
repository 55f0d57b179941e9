package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/istiodcp"
	"github.com/meshlab/meshlab/lab/waypoint"
)

// KubeObjects answers what kubectl would read from an API server for kind in namespace
// ("" for every namespace) whose labels selector matches (kubectl's -l; "" selects
// all), named name when it is not "": Pods, Services, Deployments and Gateway API
// Gateways as the lab runs them, with the status their controllers would write (see
// kubeView); any other kind as written. It is what `get -o jsonpath` and `wait` read.
func (l *Lab) KubeObjects(ctx context.Context, kind, namespace, name, selector string) ([]api.KubeObject, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, &api.ConfigError{Err: fmt.Errorf("selector %q: %w", selector, err)}
	}
	k, err := kubeKind(kind)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	m := l.model
	sc, err := l.currentScenario()
	since := l.ztunnelSince
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	v := kubeView{model: m, ready: map[string]bool{}, serviceCIDR: l.opts.ServiceCIDR, ztunnel: ztunnelPod(l), ztunnelSince: since, conds: &l.conds, now: time.Now(), decoded: &l.decoded}
	if l.rec != nil {
		v.started = l.rec.Created
	}
	if k == "Pod" || k == "Deployment" || k == config.GatewayAPIGatewayKind {
		statuses, err := l.Pods(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range statuses {
			v.ready[p.Namespace+"/"+p.Name] = p.Ready
		}
	}
	if sc != nil {
		v.objects = sc.Objects
	}
	return v.selected(k, namespace, name, sel)
}

// kubeKind returns the kind a kubectl spelling names (pods too), or a *api.ConfigError.
func kubeKind(kind string) (string, error) {
	if isPodKind(kind) {
		return "Pod", nil
	}
	if k, ok := config.CanonicalKind(kind); ok {
		return k, nil
	}
	return "", &api.ConfigError{Err: fmt.Errorf("unknown kind %q (meshlab has pods, %s)", kind, joinKinds())}
}

// selected renders the objects of kind in namespace ("" any) named name ("" any) whose
// labels sel matches.
func (v kubeView) selected(kind, namespace, name string, sel labels.Selector) ([]api.KubeObject, error) {
	k, err := kubeKind(kind)
	if err != nil {
		return nil, err
	}
	objs, err := v.list(k)
	if err != nil {
		return nil, err
	}
	out := []api.KubeObject{}
	idx := v.writtenIndex()
	for _, o := range objs {
		meta := o.meta()
		if (namespace != "" && meta.Namespace != namespace) || (name != "" && meta.Name != name) || !sel.Matches(labels.Set(meta.Labels)) {
			continue
		}
		b, err := o.serverJSON(v.serverMetaOf(idx, k, meta.Namespace, meta.Name, meta.CreationTimestamp))
		if err == nil {
			b, err = withGatewayAPIDefaults(k, b)
		}
		if err != nil {
			return nil, fmt.Errorf("render %s %s/%s: %w", k, meta.Namespace, meta.Name, err)
		}
		out = append(out, api.KubeObject{Kind: k, Namespace: meta.Namespace, Name: meta.Name, Object: b})
	}
	return out, nil
}

func isPodKind(kind string) bool {
	switch kind {
	case "pod", "pods", "po", "Pod":
		return true
	}
	return false
}

func joinKinds() string { return strings.Join(config.Kinds(), ", ") }

// kubeView renders the lab as the Kubernetes objects an API server would hold for it.
// Decisions (docs/ARCHITECTURE.md "kubectl's view"): a pod is Running and Ready when
// its agent says ready (a pod without sidecar as soon as it exists); a Deployment's
// status counts its pods as the Deployment controller does, Available once
// replicas - maxUnavailable (25% rounded down by default) are ready; a Service made for
// a gateway is of type LoadBalancer whose ingress address is its VIP (the address every
// pod of the lab reaches it at: a lab has no load balancer outside it); a Gateway API
// Gateway is Accepted, addressed at its automated Service's VIP and Programmed once
// that deployment's pod is ready.
type kubeView struct {
	model   *model.Model
	objects []*config.Object
	ready   map[string]bool // "namespace/pod" -> ready
	// started is when the lab came up: the creation time of what no object of the lab
	// made (istioctl's gateways, the kubernetes Service).
	started time.Time
	// serviceCIDR holds the kubernetes Service's address (its first host, as a
	// cluster's API server Service).
	serviceCIDR netip.Prefix
	// ztunnel is the lab's ztunnel pod (nil when none runs), made at ztunnelSince: a pod
	// of istio-system as Istio's DaemonSet makes it, outside the model (lab/ztunnel.go).
	ztunnel      *model.Pod
	ztunnelSince time.Time
	// conds gives conditions their lastTransitionTime, read at now (condclock.go).
	conds *conditionClock
	now   time.Time
	// decoded keeps the written Deployments decoded across renders (nil: decoded at
	// each).
	decoded *decodedWorkloads
}

// created returns when the object that made something of kind, namespace and name was
// created (kubectl's AGE), else when the lab started.
func (v kubeView) created(kind, namespace, name string) metav1.Time {
	for _, o := range v.objects {
		if o.Origin.Kind == kind && o.Origin.Namespace == namespace && o.Origin.Name == name && !o.Created.IsZero() {
			return metav1.NewTime(o.Created.Truncate(time.Second))
		}
	}
	// A Gateway API Gateway's automated Service and Deployment are made with it.
	for _, o := range v.objects {
		if o.KubeGateway != nil && o.Origin.Namespace == namespace && config.GatewayAPIServiceName(o.Origin.Name) == name && !o.Created.IsZero() {
			return metav1.NewTime(o.Created.Truncate(time.Second))
		}
	}
	return metav1.NewTime(v.started.Truncate(time.Second))
}

// kubernetesService is the API server's Service every cluster has in default,
// https on the first address of the service range.
func (v kubeView) kubernetesService() (corev1.Service, bool) {
	if !v.serviceCIDR.IsValid() {
		return corev1.Service{}, false
	}
	ip := v.serviceCIDR.Masked().Addr().Next().String()
	svc := corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", CreationTimestamp: metav1.NewTime(v.started.Truncate(time.Second)),
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(6443)}}},
	}
	defaultService(&svc)
	return svc, true
}

// kubeObject is one rendered object.
type kubeObject interface {
	meta() *metav1.ObjectMeta
	// serverJSON is the object's JSON with the API server's metadata sm (kubemeta.go),
	// encoded once: the fields are set before the object is marshalled, not spliced
	// into its JSON afterwards.
	serverJSON(sm serverMeta) ([]byte, error)
}

type (
	kubePod        struct{ corev1.Pod }
	kubeService    struct{ corev1.Service }
	kubeDeployment struct{ appsv1.Deployment }
	kubeGateway    struct{ gwv1.Gateway }
	// kubeWritten is an object as written (its status added), whose metadata m gives
	// the namespace and creation time the API server adds (the namespace "" for a
	// cluster-scoped kind's).
	kubeWritten struct {
		json.RawMessage
		m metav1.ObjectMeta
	}
)

func (p *kubePod) meta() *metav1.ObjectMeta        { return &p.ObjectMeta }
func (s *kubeService) meta() *metav1.ObjectMeta    { return &s.ObjectMeta }
func (d *kubeDeployment) meta() *metav1.ObjectMeta { return &d.ObjectMeta }
func (g *kubeGateway) meta() *metav1.ObjectMeta    { return &g.ObjectMeta }
func (w *kubeWritten) meta() *metav1.ObjectMeta    { return &w.m }

// MarshalJSON keeps the embedded objects' own JSON (the wrappers add only meta).
func (p kubePod) MarshalJSON() ([]byte, error)        { return json.Marshal(p.Pod) }
func (s kubeService) MarshalJSON() ([]byte, error)    { return json.Marshal(s.Service) }
func (d kubeDeployment) MarshalJSON() ([]byte, error) { return json.Marshal(d.Deployment) }
func (g kubeGateway) MarshalJSON() ([]byte, error)    { return json.Marshal(g.Gateway) }
func (w kubeWritten) MarshalJSON() ([]byte, error)    { return w.RawMessage, nil }

// The objects are this render's own: the server's fields are set on them.
func (p *kubePod) serverJSON(sm serverMeta) ([]byte, error) {
	sm.setOn(&p.ObjectMeta)
	return sm.marshal(p.Pod)
}

func (s *kubeService) serverJSON(sm serverMeta) ([]byte, error) {
	sm.setOn(&s.ObjectMeta)
	return sm.marshal(s.Service)
}

func (d *kubeDeployment) serverJSON(sm serverMeta) ([]byte, error) {
	sm.setOn(&d.ObjectMeta)
	return sm.marshal(d.Deployment)
}

func (g *kubeGateway) serverJSON(sm serverMeta) ([]byte, error) {
	sm.setOn(&g.ObjectMeta)
	return sm.marshal(g.Gateway)
}

func (w *kubeWritten) serverJSON(sm serverMeta) ([]byte, error) {
	return sm.writtenJSON(w.RawMessage, w.m.Namespace, w.m.CreationTimestamp)
}

// list renders the objects of canonical kind k, sorted by namespace and name.
func (v kubeView) list(k string) ([]kubeObject, error) {
	var out []kubeObject
	switch k {
	case "Pod":
		for _, p := range v.model.Pods {
			out = append(out, &kubePod{v.pod(p)})
		}
		if v.ztunnel != nil {
			out = append(out, &kubePod{v.ztunnelPod()})
		}
	case "Service":
		svcs := make([]corev1.Service, 0, len(v.model.Services)+len(v.model.ExternalNames))
		for _, s := range v.model.Services {
			svcs = append(svcs, v.service(s))
		}
		for _, e := range v.model.ExternalNames {
			svcs = append(svcs, v.externalNameService(e))
		}
		slices.SortStableFunc(svcs, func(a, b corev1.Service) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		allocateNodePorts(svcs, func(s *corev1.Service) string {
			return v.serverMetaOf(nil, "Service", s.Namespace, s.Name, s.CreationTimestamp).uid
		})
		for _, s := range svcs {
			out = append(out, &kubeService{s})
		}
		if k, ok := v.kubernetesService(); ok && !slices.ContainsFunc(v.model.Services, func(s *model.Service) bool { return s.Namespace == "default" && s.Name == "kubernetes" }) {
			out = append(out, &kubeService{k})
		}
	case "Deployment":
		for _, d := range v.deployments() {
			out = append(out, &kubeDeployment{d})
		}
	case config.GatewayAPIGatewayKind:
		for _, o := range v.objects {
			if o.KubeGateway != nil {
				out = append(out, &kubeGateway{v.gateway(o)})
			}
		}
	default:
		for _, o := range v.objects {
			if o.Origin.Kind != k {
				continue
			}
			var m struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(o.JSON, &m); err != nil {
				return nil, fmt.Errorf("read %s: %w", o.Origin, err)
			}
			m.Metadata.Namespace, m.Metadata.Name = o.Origin.Namespace, o.Origin.Name
			m.Metadata.CreationTimestamp = v.created(o.Origin.Kind, o.Origin.Namespace, o.Origin.Name)
			raw := json.RawMessage(o.JSON)
			if o.HTTPRoute != nil || o.GRPCRoute != nil || o.TCPRoute != nil || o.TLSRoute != nil {
				// istiod's gateway controller writes each route's parent status.
				st := config.RouteStatus(v.objects, o)
				v.conds.stampRoute(o.Origin.Kind+"/"+o.Origin.Namespace+"/"+o.Origin.Name, &st, m.Metadata.CreationTimestamp.Time, v.now)
				raw = withStatus(raw, st)
			}
			if addrs := config.ServiceEntryAddresses(v.model, o); len(addrs) > 0 {
				// istiod's IP autoallocator writes the addresses it gave the hosts.
				raw = withStatus(raw, map[string]any{"addresses": addrs})
			}
			if o.Ingress != nil && config.IsIstioIngress(v.objects, o) {
				raw = withStatus(raw, v.ingressStatus())
			}
			if k == "Namespace" { // the API server's: a namespace is Active until deleted
				raw = withStatus(raw, corev1.NamespaceStatus{Phase: corev1.NamespaceActive})
			}
			if config.IsClusterScoped(k) {
				m.Metadata.Namespace = ""
			}
			out = append(out, &kubeWritten{RawMessage: raw, m: m.Metadata})
		}
	}
	if k == "Namespace" {
		nss, err := v.implicitNamespaces(out)
		if err != nil {
			return nil, err
		}
		out = append(out, nss...)
	}
	if k == "ConfigMap" {
		cms, err := v.istioConfigMaps(out)
		if err != nil {
			return nil, err
		}
		out = append(out, cms...)
	}
	slices.SortFunc(out, func(a, b kubeObject) int {
		if k == "Namespace" { // cluster-scoped: a written one may carry the namespace it was applied in
			return cmp.Compare(a.meta().Name, b.meta().Name)
		}
		return cmp.Or(cmp.Compare(a.meta().Namespace, b.meta().Namespace), cmp.Compare(a.meta().Name, b.meta().Name))
	})
	return out, nil
}

// istioConfigMaps renders the ConfigMaps Istio's install keeps in istio-system (the mesh
// config istiod reads, key mesh, and meshNetworks; the injector's) for the lab's mesh
// settings, as the lab's istiod is given them; one written to the lab (in written) wins.
func (v kubeView) istioConfigMaps(written []kubeObject) ([]kubeObject, error) {
	cms, err := istiodcp.ConfigMaps(v.model.Mesh)
	if err != nil {
		return nil, err
	}
	var out []kubeObject
	for _, cm := range cms {
		if slices.ContainsFunc(written, func(o kubeObject) bool { return o.meta().Namespace == cm.Namespace && o.meta().Name == cm.Name }) {
			continue
		}
		cm.CreationTimestamp = metav1.NewTime(v.started.Truncate(time.Second))
		b, err := json.Marshal(cm)
		if err != nil {
			return nil, err
		}
		out = append(out, &kubeWritten{RawMessage: b, m: cm.ObjectMeta})
	}
	return out, nil
}

// clusterNamespaces are the namespaces every cluster with Istio has, written or not.
var clusterNamespaces = []string{"default", "kube-node-lease", "kube-public", "kube-system", "istio-system"}

// implicitNamespaces are the namespaces an API server would list that no Namespace
// object of the lab wrote: a cluster's own, and every namespace the lab's pods,
// Services and objects live in (a cluster would not take them without one). Each is
// Active since the lab came up, with the kubernetes.io/metadata.name label the API
// server sets.
func (v kubeView) implicitNamespaces(written []kubeObject) ([]kubeObject, error) {
	names := map[string]bool{}
	for _, n := range clusterNamespaces {
		names[n] = true
	}
	for _, p := range v.model.Pods {
		names[p.Namespace] = true
	}
	for _, s := range v.model.Services {
		names[s.Namespace] = true
	}
	for _, o := range v.objects {
		if o.Origin.Namespace != "" {
			names[o.Origin.Namespace] = true
		}
	}
	for _, o := range written {
		delete(names, o.meta().Name)
	}
	var out []kubeObject
	for _, n := range slices.Sorted(maps.Keys(names)) {
		ns := corev1.Namespace{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{
				Name: n, Labels: map[string]string{corev1.LabelMetadataName: n},
				CreationTimestamp: metav1.NewTime(v.started.Truncate(time.Second)),
			},
			Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		}
		b, err := json.Marshal(ns)
		if err != nil {
			return nil, err
		}
		out = append(out, &kubeWritten{RawMessage: b, m: ns.ObjectMeta})
	}
	return out, nil
}

// withStatus returns an object as written with the status a controller writes.
func withStatus(raw json.RawMessage, status any) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw
	}
	st, err := json.Marshal(status)
	if err != nil {
		return raw
	}
	obj["status"] = st
	b, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return b
}

func (v kubeView) pod(p *model.Pod) corev1.Pod {
	ready := v.ready[p.Namespace+"/"+p.Name]
	out := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels),
			CreationTimestamp: v.created(p.Origin.Kind, p.Origin.Namespace, p.Origin.Name)},
		Spec:   corev1.PodSpec{ServiceAccountName: p.ServiceAccount, NodeName: "meshlab"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, PodIP: p.IP.String(), PodIPs: []corev1.PodIP{{IP: p.IP.String()}}},
	}
	if !p.Router {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: p.Workload, Image: p.App.Image})
	}
	if p.Sidecar.Inject && !p.Sidecar.GRPCAgent {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2"})
	}
	defaultPodSpec(&out.Spec)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
		out.Status.Phase = corev1.PodRunning
	}
	out.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: status},
		{Type: corev1.PodReady, Status: status},
	}
	v.conds.stampPod(&out, v.now)
	return out
}

// ztunnelPod renders the lab's ztunnel as its DaemonSet's pod: one container,
// istio-proxy, running Istio's ztunnel image.
func (v kubeView) ztunnelPod() corev1.Pod {
	z := v.ztunnel
	out := v.pod(z)
	out.CreationTimestamp = metav1.NewTime(v.ztunnelSince.Truncate(time.Second))
	out.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ztunnel"}}
	out.Spec.Containers = []corev1.Container{{Name: "istio-proxy", Image: "docker.io/istio/ztunnel"}}
	defaultPodSpec(&out.Spec)
	return out
}

// isGatewayService reports whether s is a Service meshlab made for a gateway deployment
// (istioctl's or Istio's automated one for a Gateway API Gateway): type LoadBalancer, as
// theirs are.
func (v kubeView) isGatewayService(s *model.Service) bool {
	for _, o := range v.objects {
		if o.Service != nil && o.Origin.Namespace == s.Namespace && o.Origin.Name == s.Name {
			return false
		}
	}
	if s.Labels[model.LabelGatewayManaged] == model.ManagedByMeshController {
		return false // a waypoint's Service: ClusterIP, as the istio-waypoint class makes it
	}
	return s.Selector[model.GatewayAPINameLabel] != "" || (s.Namespace == "istio-system" && s.Origin.Kind == "Service" && slices.Contains([]string{model.IngressGatewayName, model.EgressGatewayName}, s.Name))
}

func (v kubeView) service(s *model.Service) corev1.Service {
	out := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, CreationTimestamp: v.created(s.Origin.Kind, s.Origin.Namespace, s.Origin.Name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: maps.Clone(s.Selector)},
	}
	out.Labels = maps.Clone(s.Labels) // a waypoint's Service (deployment controller's labels)
	var written *corev1.Service
	for _, o := range v.objects {
		if o.Service != nil && o.Origin.Namespace == s.Namespace && o.Origin.Name == s.Name {
			written = o.Service
			out.Labels, out.Annotations = maps.Clone(o.Service.Labels), maps.Clone(o.Service.Annotations)
			// The spec as written (its ports' names and appProtocol, a named
			// targetPort, sessionAffinity...), with the addresses the lab gave it.
			out.Spec = *o.Service.Spec.DeepCopy()
			if out.Spec.Type == "" {
				out.Spec.Type = corev1.ServiceTypeClusterIP
			}
		}
	}
	gateway := v.isGatewayService(s)
	if gateway {
		out.Spec.Type = corev1.ServiceTypeLoadBalancer
		out.Labels = maps.Clone(s.Selector)
		if gw := v.gatewayAPIObject(s.Namespace, s.Selector[model.GatewayAPINameLabel]); gw != nil && gatewayServiceType(gw) == corev1.ServiceTypeClusterIP {
			out.Spec.Type, gateway = corev1.ServiceTypeClusterIP, false
		}
	}
	if s.VIP.IsValid() {
		out.Spec.ClusterIP, out.Spec.ClusterIPs = s.VIP.String(), []string{s.VIP.String()}
	} else {
		out.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if written == nil || len(written.Spec.Ports) == 0 {
		out.Spec.Ports = nil
		for _, p := range s.Ports {
			out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: corev1.ProtocolTCP, Port: int32(p.Port), TargetPort: intstr.FromInt32(int32(p.TargetPort))})
		}
	}
	if out.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if p := v.externalTrafficPolicy(s.Namespace, s.Name); p != "" {
			out.Spec.ExternalTrafficPolicy = p
		}
	}
	defaultService(&out)
	if gateway && s.VIP.IsValid() {
		vip := corev1.LoadBalancerIPModeVIP
		out.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.VIP.String(), IPMode: &vip}}
	}
	if c, ok := waypointBoundCondition(v.model, s); ok {
		out.Status.Conditions = []metav1.Condition{c}
		v.conds.stamp("Service/"+s.Namespace+"/"+s.Name, out.Status.Conditions, out.CreationTimestamp.Time, v.now)
	}
	return out
}

// externalNameService is an ExternalName Service as the API server holds it: its type,
// target and ports, no cluster IP.
func (v kubeView) externalNameService(e *model.ExternalName) corev1.Service {
	out := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, CreationTimestamp: v.created(e.Origin.Kind, e.Origin.Namespace, e.Origin.Name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: e.Target},
	}
	for _, o := range v.objects {
		if o.Service != nil && o.Origin.Namespace == e.Namespace && o.Origin.Name == e.Name {
			out.Labels, out.Annotations = maps.Clone(o.Service.Labels), maps.Clone(o.Service.Annotations)
			out.Spec.ExternalName = o.Service.Spec.ExternalName
			out.Spec.Ports = slices.Clone(o.Service.Spec.Ports)
		}
	}
	defaultService(&out)
	return out
}

// externalTrafficPolicy is what `kubectl patch` set on the lab's gateway Service
// (model.AnnotationExternalTrafficPolicy on the lab's MeshConfig), "" when nothing did.
func (v kubeView) externalTrafficPolicy(namespace, name string) corev1.ServiceExternalTrafficPolicy {
	for _, o := range v.objects {
		if o.MeshConfig == nil {
			continue
		}
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(o.JSON, &m) != nil {
			continue
		}
		var set map[string]string
		if json.Unmarshal([]byte(m.Metadata.Annotations[model.AnnotationExternalTrafficPolicy]), &set) == nil {
			return corev1.ServiceExternalTrafficPolicy(set[namespace+"/"+name])
		}
	}
	return ""
}

// ingressStatus is the status istiod's ingress controller writes on each Ingress it
// takes: the ingress gateway Service's load balancer addresses (none without one).
func (v kubeView) ingressStatus() networkingv1.IngressStatus {
	st := networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{}}}
	for _, s := range v.model.Services {
		if s.Namespace != model.DefaultRootNamespace || s.Name != model.IngressGatewayName {
			continue
		}
		svc := v.service(s)
		for _, in := range svc.Status.LoadBalancer.Ingress {
			st.LoadBalancer.Ingress = append(st.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
		}
		for _, ip := range svc.Spec.ExternalIPs {
			st.LoadBalancer.Ingress = append(st.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
	}
	return st
}

// serviceTypeAnnotation is Istio's annotation of a Gateway API Gateway choosing its
// automated Service's type (LoadBalancer by default).
const serviceTypeAnnotation = "networking.istio.io/service-type"

// gatewayServiceType is the type of a Gateway API Gateway's automated Service.
func gatewayServiceType(o *config.Object) corev1.ServiceType {
	if t := o.KubeGateway.Annotations[serviceTypeAnnotation]; t != "" {
		return corev1.ServiceType(t)
	}
	return corev1.ServiceTypeLoadBalancer
}

// gatewayAPIObject returns the Gateway API Gateway namespace/name, nil when there is none.
func (v kubeView) gatewayAPIObject(namespace, name string) *config.Object {
	if name == "" {
		return nil
	}
	for _, o := range v.objects {
		if o.KubeGateway != nil && o.Origin.Namespace == namespace && o.Origin.Name == name {
			return o
		}
	}
	return nil
}

// deployments renders every Deployment the lab runs: those written (with their spec)
// and those meshlab makes as istioctl and Istio's gateway controller do.
func (v kubeView) deployments() []appsv1.Deployment {
	type key struct{ ns, name string }
	written := map[key]*appsv1.Deployment{}
	decoded := v.decoded
	if decoded == nil {
		decoded = &decodedWorkloads{}
	}
	for o, d := range decoded.deployments(v.objects) {
		written[key{o.Origin.Namespace, o.Origin.Name}] = d
	}
	pods := map[key][]*model.Pod{}
	for _, p := range v.model.Pods {
		if p.Origin.Kind == "Deployment" {
			k := key{p.Origin.Namespace, p.Origin.Name}
			pods[k] = append(pods[k], p)
		}
	}
	var out []appsv1.Deployment
	for _, k := range slices.SortedFunc(maps.Keys(pods), func(a, b key) int { return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name)) }) {
		d := written[k]
		if d == nil {
			d = &appsv1.Deployment{}
			replicas := int32(len(pods[k]))
			d.Spec.Replicas = &replicas
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: maps.Clone(pods[k][0].Labels)}
			d.Spec.Template.Labels = maps.Clone(pods[k][0].Labels)
			d.Labels = maps.Clone(pods[k][0].Labels)
		}
		d.APIVersion, d.Kind = "apps/v1", "Deployment"
		d.Namespace, d.Name = k.ns, k.name
		d.CreationTimestamp = v.created("Deployment", k.ns, k.name)
		revision := int64(1)
		if o := v.writtenObject(nil, "Deployment", k.ns, k.name); o != nil && o.TemplateRevision > 0 {
			revision = o.TemplateRevision
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[deploymentRevisionAnnotation] = fmt.Sprint(revision) // the Deployment controller's
		defaultDeployment(d)
		d.Status = deploymentStatus(d, pods[k], v.ready)
		v.conds.stampDeployment(d, v.now)
		out = append(out, *d)
	}
	return out
}

// deploymentRevisionAnnotation is the Deployment controller's number of the
// Deployment's current pod template.
const deploymentRevisionAnnotation = "deployment.kubernetes.io/revision"

// deploymentStatus is what the Deployment controller writes for d running pods: counts,
// and Available once replicas - maxUnavailable pods are ready (maxUnavailable from the
// rolling update strategy, 25% rounded down by default).
func deploymentStatus(d *appsv1.Deployment, pods []*model.Pod, ready map[string]bool) appsv1.DeploymentStatus {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: int32(len(pods)), UpdatedReplicas: int32(len(pods))}
	for _, p := range pods {
		if ready[p.Namespace+"/"+p.Name] {
			st.ReadyReplicas++
		}
	}
	st.AvailableReplicas = st.ReadyReplicas
	st.UnavailableReplicas = max(0, want-st.AvailableReplicas)
	maxUnavailable := intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType && ru != nil && ru.MaxUnavailable != nil {
		maxUnavailable = *ru.MaxUnavailable
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		maxUnavailable = intstr.FromInt32(0)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, int(want), false)
	if err != nil {
		unavailable = 0
	}
	available := corev1.ConditionFalse
	reason, message := "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	if st.AvailableReplicas >= want-int32(unavailable) {
		available, reason, message = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
	}
	st.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: available, Reason: reason, Message: message},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", d.Name)},
	}
	return st
}

// gateway renders a Gateway API Gateway with the status Istio's gateway controller
// writes: Accepted, its automated Service's VIP as address, Programmed once that
// deployment's pod is ready.
func (v kubeView) gateway(o *config.Object) gwv1.Gateway {
	gw := *o.KubeGateway.DeepCopy()
	gw.APIVersion, gw.Kind = gwv1.GroupVersion.String(), "Gateway"
	gw.Namespace, gw.Name = o.Origin.Namespace, o.Origin.Name
	gw.CreationTimestamp = v.created(o.Origin.Kind, o.Origin.Namespace, o.Origin.Name)
	if w := v.model.Waypoint(gw.Namespace, gw.Name); w != nil && gw.Spec.GatewayClassName == model.WaypointGatewayClass {
		ready := func(p *model.Pod) bool { return v.ready[p.Namespace+"/"+p.Name] }
		gw.Status = waypoint.Deps{Model: v.model, PodReady: ready}.Status(w)
		v.conds.stamp("Gateway/"+gw.Namespace+"/"+gw.Name, gw.Status.Conditions, gw.CreationTimestamp.Time, v.now)
		return gw
	}
	svc := config.GatewayAPIServiceName(o.Origin.Name)
	programmed, reason, message := metav1.ConditionFalse, "Invalid", "the gateway's deployment "+svc+" has no ready pod yet"
	for _, p := range v.model.Pods {
		if p.Namespace == gw.Namespace && p.Router && p.Labels[model.GatewayAPINameLabel] == gw.Name && v.ready[p.Namespace+"/"+p.Name] {
			programmed, reason, message = metav1.ConditionTrue, "Programmed", "Resource programmed, assigned to service(s) "+svc+"."+gw.Namespace+".svc.cluster.local:"+firstListenerPort(&gw)
		}
	}
	for _, s := range v.model.Services {
		if s.Namespace == gw.Namespace && s.Name == svc && s.VIP.IsValid() {
			// A LoadBalancer Service's address is its VIP (see kubeView); a ClusterIP one
			// is addressed by its name, as Istio writes it.
			ip, host := gwv1.IPAddressType, gwv1.HostnameAddressType
			gw.Status.Addresses = []gwv1.GatewayStatusAddress{{Type: &ip, Value: s.VIP.String()}}
			if gatewayServiceType(o) == corev1.ServiceTypeClusterIP {
				gw.Status.Addresses = []gwv1.GatewayStatusAddress{{Type: &host, Value: svc + "." + gw.Namespace + ".svc.cluster.local"}}
			}
		}
	}
	gw.Status.Conditions = []metav1.Condition{
		{Type: string(gwv1.GatewayConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.GatewayReasonAccepted), Message: "Resource accepted", ObservedGeneration: 1},
		{Type: string(gwv1.GatewayConditionProgrammed), Status: programmed, Reason: reason, Message: message, ObservedGeneration: 1},
	}
	v.conds.stamp("Gateway/"+gw.Namespace+"/"+gw.Name, gw.Status.Conditions, gw.CreationTimestamp.Time, v.now)
	gw.Status.Listeners = config.ListenerStatus(v.objects, o)
	for i := range gw.Status.Listeners {
		l := &gw.Status.Listeners[i]
		v.conds.stamp("Gateway/"+gw.Namespace+"/"+gw.Name+"/listener/"+string(l.Name), l.Conditions, gw.CreationTimestamp.Time, v.now)
	}
	return gw
}

func firstListenerPort(gw *gwv1.Gateway) string {
	if len(gw.Spec.Listeners) == 0 {
		return ""
	}
	return fmt.Sprint(gw.Spec.Listeners[0].Port)
}
