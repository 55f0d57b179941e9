package lab

import (
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
)

// kubeViewScenario is the mtls-migration task's shape (curl and httpbin in two
// namespaces), an Istio ingress Gateway and a Gateway API Gateway.
const kubeViewScenario = `
apiVersion: v1
kind: Service
metadata: {name: httpbin, namespace: foo, labels: {app: httpbin, service: httpbin}}
spec:
  ports: [{name: http, port: 8000, targetPort: 8080}]
  selector: {app: httpbin}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: httpbin, namespace: foo}
spec:
  replicas: 4
  selector: {matchLabels: {app: httpbin}}
  template:
    metadata: {labels: {app: httpbin, version: v1}}
    spec:
      containers: [{name: httpbin, image: docker.io/kong/httpbin, ports: [{containerPort: 8080}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: curl, namespace: foo}
spec:
  selector: {matchLabels: {app: curl}}
  strategy: {type: Recreate}
  template:
    metadata: {labels: {app: curl}}
    spec:
      containers: [{name: curl, image: curlimages/curl, command: [/bin/sleep, infinity]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: curl, namespace: bar}
spec:
  selector: {matchLabels: {app: curl}}
  template:
    metadata: {labels: {app: curl}}
    spec:
      containers: [{name: curl, image: curlimages/curl, command: [/bin/sleep, infinity]}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: httpbin-gateway, namespace: foo}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["httpbin.example.com"]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gtw, namespace: foo}
spec:
  gatewayClassName: istio
  listeners: [{name: http, hostname: "httpbin.example.com", port: 80, protocol: HTTP}]
`

func newKubeView(t *testing.T) kubeView {
	t.Helper()
	sc, err := config.Load("kube.yaml", []byte(kubeViewScenario))
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	return kubeView{model: m, objects: sc.Objects, ready: map[string]bool{}}
}

func kubeSelect(t *testing.T, v kubeView, kind, ns, name, selector string) []json.RawMessage {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := v.selected(kind, ns, name, sel)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		out[i] = o.Object
	}
	return out
}

func TestKubeViewPodsBySelectorAndReadiness(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	curls := kubeSelect(t, v, "Pod", "", "", "app=curl")
	if len(curls) != 2 {
		t.Fatalf("-l app=curl selected %d pods, want the two curl pods (foo, bar)", len(curls))
	}
	var pods []corev1.Pod
	for _, b := range curls {
		var p corev1.Pod
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	if pods[0].Namespace != "bar" || pods[1].Namespace != "foo" || pods[0].Kind != "Pod" || pods[0].APIVersion != "v1" {
		t.Fatalf("pods not sorted by namespace or not typed: %+v", pods)
	}
	if pods[0].Status.Phase != corev1.PodPending || pods[0].Status.PodIP == "" {
		t.Fatalf("a pod whose agent has not said ready: phase %s, ip %q; want Pending with its IP", pods[0].Status.Phase, pods[0].Status.PodIP)
	}
	v.ready["bar/"+pods[0].Name] = true
	var ready corev1.Pod
	if err := json.Unmarshal(kubeSelect(t, v, "Pod", "bar", pods[0].Name, "")[0], &ready); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ready.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	if ready.Status.Phase != corev1.PodRunning || i < 0 || ready.Status.Conditions[i].Status != corev1.ConditionTrue {
		t.Fatalf("ready pod: phase %s, conditions %+v; want Running and Ready=True", ready.Status.Phase, ready.Status.Conditions)
	}
	if got := kubeSelect(t, v, "Pod", "foo", "", "app=curl,version!=v1"); len(got) != 1 {
		t.Fatalf("-n foo -l 'app=curl,version!=v1' selected %d, want 1", len(got))
	}
}

func TestKubeViewGatewayServiceIsALoadBalancer(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	b := kubeSelect(t, v, "Service", "istio-system", model.IngressGatewayName, "")
	if len(b) != 1 {
		t.Fatalf("istio-system/istio-ingressgateway: %d objects", len(b))
	}
	var svc corev1.Service
	if err := json.Unmarshal(b[0], &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != svc.Spec.ClusterIP {
		t.Fatalf("ingress gateway service: type %s, ingress %+v, clusterIP %s; want LoadBalancer at its VIP", svc.Spec.Type, svc.Status.LoadBalancer.Ingress, svc.Spec.ClusterIP)
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "http2" })
	if i < 0 || svc.Spec.Ports[i].Port != 80 || svc.Spec.Ports[i].TargetPort != intstr.FromInt32(8080) {
		t.Fatalf("ports %+v: want http2 80 -> 8080 as istioctl's demo profile", svc.Spec.Ports)
	}
	var user corev1.Service
	if err := json.Unmarshal(kubeSelect(t, v, "svc", "foo", "httpbin", "service=httpbin")[0], &user); err != nil {
		t.Fatal(err)
	}
	if user.Spec.Type != corev1.ServiceTypeClusterIP || len(user.Status.LoadBalancer.Ingress) != 0 || user.Labels["app"] != "httpbin" {
		t.Fatalf("a written ClusterIP Service: type %s, lb %+v, labels %v", user.Spec.Type, user.Status.LoadBalancer, user.Labels)
	}
}

func TestKubeViewDeploymentAvailability(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	deployment := func() appsv1.Deployment {
		t.Helper()
		var d appsv1.Deployment
		b := kubeSelect(t, v, "deploy", "foo", "httpbin", "")
		if len(b) != 1 {
			t.Fatalf("deploy foo/httpbin: %d objects", len(b))
		}
		if err := json.Unmarshal(b[0], &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	available := func(d appsv1.Deployment) corev1.ConditionStatus {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable {
				return c.Status
			}
		}
		return "absent"
	}
	d := deployment()
	if d.Status.Replicas != 4 || d.Status.ReadyReplicas != 0 || available(d) != corev1.ConditionFalse {
		t.Fatalf("no pod ready: replicas %d, ready %d, Available %s", d.Status.Replicas, d.Status.ReadyReplicas, available(d))
	}
	var names []string
	for _, p := range v.model.Pods {
		if p.Namespace == "foo" && p.Origin.Name == "httpbin" {
			names = append(names, p.Name)
		}
	}
	for _, n := range names[:2] {
		v.ready["foo/"+n] = true
	}
	if d = deployment(); d.Status.ReadyReplicas != 2 || available(d) != corev1.ConditionFalse {
		t.Fatalf("2 of 4 ready (maxUnavailable 25%% = 1): ready %d, Available %s; want False", d.Status.ReadyReplicas, available(d))
	}
	v.ready["foo/"+names[2]] = true
	if d = deployment(); available(d) != corev1.ConditionTrue {
		t.Fatalf("3 of 4 ready: Available %s, want True (4 - 1 unavailable allowed)", available(d))
	}
	// Recreate allows none unavailable; and istioctl's gateway deployment is there too.
	st := deploymentStatus(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}, v.model.Pods[:1], map[string]bool{})
	if st.Conditions[0].Status != corev1.ConditionFalse {
		t.Fatalf("Recreate with 0 of 1 ready: Available %s", st.Conditions[0].Status)
	}
	if got := kubeSelect(t, v, "deployment", "istio-system", model.IngressGatewayName, "istio=ingressgateway"); len(got) != 1 {
		t.Fatalf("istioctl's istio-ingressgateway Deployment: %d objects, want 1", len(got))
	}
}

func TestKubeViewGatewayAPIProgrammed(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	gateway := func() gwv1.Gateway {
		t.Helper()
		var gw gwv1.Gateway
		b := kubeSelect(t, v, "gtw", "foo", "gtw", "")
		if len(b) != 1 {
			t.Fatalf("gtw foo/gtw: %d objects", len(b))
		}
		if err := json.Unmarshal(b[0], &gw); err != nil {
			t.Fatal(err)
		}
		return gw
	}
	programmed := func(gw gwv1.Gateway) string {
		for _, c := range gw.Status.Conditions {
			if c.Type == string(gwv1.GatewayConditionProgrammed) {
				return string(c.Status)
			}
		}
		return "absent"
	}
	gw := gateway()
	if programmed(gw) != "False" || len(gw.Status.Addresses) != 1 || gw.Spec.GatewayClassName != "istio" || gw.Kind != "Gateway" {
		t.Fatalf("before its pod is ready: Programmed %s, addresses %+v, class %s, kind %s", programmed(gw), gw.Status.Addresses, gw.Spec.GatewayClassName, gw.Kind)
	}
	var svc corev1.Service
	if err := json.Unmarshal(kubeSelect(t, v, "svc", "foo", "gtw-istio", "")[0], &svc); err != nil {
		t.Fatal(err)
	}
	if gw.Status.Addresses[0].Value != svc.Spec.ClusterIP || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("address %s, automated Service %s of type %s", gw.Status.Addresses[0].Value, svc.Spec.ClusterIP, svc.Spec.Type)
	}
	for _, p := range v.model.Pods {
		if p.Router && p.Namespace == "foo" {
			v.ready["foo/"+p.Name] = true
		}
	}
	if programmed(gateway()) != "True" {
		t.Fatalf("with its pod ready: Programmed %s, want True", programmed(gateway()))
	}
}

// TestKubeViewConditionTransitionTimes gives conditions a lastTransitionTime as a
// controller sets it: the object's creation for a condition as first written, the read
// that saw a new status after, unchanged by reads that see the same status.
func TestKubeViewConditionTransitionTimes(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	var made time.Time // the Gateway's creation
	v.conds, v.now = &conditionClock{}, time.Now().Add(time.Minute)
	times := func() map[string]time.Time {
		t.Helper()
		var gw gwv1.Gateway
		if err := json.Unmarshal(kubeSelect(t, v, "gtw", "foo", "gtw", "")[0], &gw); err != nil {
			t.Fatal(err)
		}
		made = gw.CreationTimestamp.UTC()
		out := map[string]time.Time{}
		for _, c := range gw.Status.Conditions {
			out[c.Type+"="+string(c.Status)] = c.LastTransitionTime.UTC()
		}
		return out
	}
	got := times()
	if want := map[string]time.Time{"Accepted=True": made, "Programmed=False": made}; made.IsZero() || !maps.Equal(got, want) {
		t.Fatalf("first read: %v, want %v", got, want)
	}
	for _, p := range v.model.Pods {
		if p.Router && p.Namespace == "foo" {
			v.ready["foo/"+p.Name] = true
		}
	}
	ready := made.Add(5 * time.Minute)
	v.now = ready
	want := map[string]time.Time{"Accepted=True": made, "Programmed=True": ready}
	if got := times(); !maps.Equal(got, want) {
		t.Fatalf("read after its pod became ready: %v, want %v", got, want)
	}
	v.now = ready.Add(time.Hour)
	if got := times(); !maps.Equal(got, want) {
		t.Fatalf("read again with no change: %v, want %v", got, want)
	}
	b := kubeSelect(t, v, "pods", "foo", "", "")
	if len(b) == 0 || strings.Contains(string(b[0]), `"lastTransitionTime":null`) {
		t.Fatalf("pods of foo: %d, first %s: want every condition with a lastTransitionTime", len(b), b)
	}
}

func TestKubeViewWrittenKindsAndBadInput(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	if got := kubeSelect(t, v, "Gateway", "foo", "httpbin-gateway", ""); len(got) != 1 {
		t.Fatalf("an Istio Gateway as written: %d objects", len(got))
	}
	if got := kubeSelect(t, v, "Gateway", "", "", "app=none"); len(got) != 0 {
		t.Fatalf("-l app=none selected %d", len(got))
	}
	l := &Lab{}
	if _, err := l.KubeObjects(t.Context(), "pods", "", "", "app in (a"); err == nil {
		t.Fatal("a bad selector was accepted")
	}
	if _, err := l.KubeObjects(t.Context(), "widgets", "", "", ""); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}

func TestKubeViewZtunnelPod(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	if got := kubeSelect(t, v, "Pod", "istio-system", "", "app=ztunnel"); len(got) != 0 {
		t.Fatalf("a lab without ztunnel lists %d ztunnel pods", len(got))
	}
	since := time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)
	v.ztunnel = &model.Pod{Name: "ztunnel-x2b9q", Namespace: "istio-system", Workload: "ztunnel", IP: netip.MustParseAddr("10.244.3.254"),
		ServiceAccount: "ztunnel", Labels: ztunnelLabels()}
	v.ztunnelSince = since
	v.ready["istio-system/ztunnel-x2b9q"] = true
	got := kubeSelect(t, v, "Pod", "istio-system", "", "app=ztunnel")
	if len(got) != 1 {
		t.Fatalf("-n istio-system -l app=ztunnel selected %d pods, want the ztunnel", len(got))
	}
	var p corev1.Pod
	if err := json.Unmarshal(got[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.Name != "ztunnel-x2b9q" || p.Status.Phase != corev1.PodRunning || !p.CreationTimestamp.Time.Equal(since) || p.Spec.ServiceAccountName != "ztunnel" {
		t.Fatalf("ztunnel pod = %s %s created %s sa %s; want ztunnel-x2b9q Running created %s sa ztunnel", p.Name, p.Status.Phase, p.CreationTimestamp, p.Spec.ServiceAccountName, since)
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Name != "istio-proxy" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "DaemonSet" {
		t.Fatalf("ztunnel pod containers %+v owners %+v; want istio-proxy alone, owned by DaemonSet ztunnel", p.Spec.Containers, p.OwnerReferences)
	}
	if p.Labels[model.LabelDataplaneMode] != model.DataplaneModeNone {
		t.Fatalf("ztunnel pod labels %v: want %s=none as Istio's chart sets", p.Labels, model.LabelDataplaneMode)
	}
}

// TestKubeViewNamespaces lists the namespaces an API server would: a cluster's own and
// every one the lab's objects live in, none written as a Namespace, each Active with the
// kubernetes.io/metadata.name label; a written Namespace is listed once, as written.
func TestKubeViewNamespaces(t *testing.T) {
	t.Parallel()
	v := newKubeView(t)
	names := func() []string {
		var out []string
		for _, raw := range kubeSelect(t, v, "Namespace", "", "", "") {
			var ns corev1.Namespace
			if err := json.Unmarshal(raw, &ns); err != nil {
				t.Fatal(err)
			}
			if ns.Labels[corev1.LabelMetadataName] != ns.Name && ns.Name != "foo" {
				t.Errorf("namespace %s: labels %v, want %s=%s", ns.Name, ns.Labels, corev1.LabelMetadataName, ns.Name)
			}
			out = append(out, ns.Name+"/"+string(ns.Status.Phase))
		}
		return out
	}
	want := []string{"bar/Active", "default/Active", "foo/Active", "istio-system/Active", "kube-node-lease/Active", "kube-public/Active", "kube-system/Active"}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("namespaces %v, want %v", got, want)
	}
	sc, err := config.Load("ns.yaml", []byte(kubeViewScenario+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: foo, labels: {istio-injection: enabled}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v.objects = sc.Objects
	got := kubeSelect(t, v, "Namespace", "", "foo", "istio-injection=enabled")
	if len(got) != 1 {
		t.Fatalf("the written foo selected by its label: %d objects", len(got))
	}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("namespaces with foo written %v, want %v (foo once, in name order)", got, want)
	}
}
