package config

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

func serviceOf(m *model.Model, host string) *model.Service {
	for _, s := range m.Services {
		if s.Hostname() == host {
			return s
		}
	}
	return nil
}

// testdata/kubectl-get-all.yaml is what `kubectl get ... -A -o yaml` prints for a shop
// namespace with httpbin (a Deployment, its ReplicaSet and injected Pod), a standalone
// injected fortio pod, a tight circuit breaker, and the cluster's own objects beside them.
func loadDump(t *testing.T) *Scenario {
	t.Helper()
	data, err := os.ReadFile("testdata/kubectl-get-all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Load("dump.yaml", data)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return sc
}

func TestLoadKubectlList(t *testing.T) {
	sc := loadDump(t)
	var objs []string
	for _, o := range sc.Objects {
		objs = append(objs, RefOf(o).String())
	}
	want := []string{
		"Namespace default/shop", "Service shop/httpbin", "Deployment shop/httpbin", "ServiceAccount shop/httpbin",
		"Pod default/fortio-deploy", "DestinationRule shop/httpbin",
	}
	if !slices.Equal(objs, want) {
		t.Errorf("objects:\n  %s\nwant:\n  %s", strings.Join(objs, "\n  "), strings.Join(want, "\n  "))
	}
	var skipped []string
	for _, c := range sc.Skipped {
		skipped = append(skipped, c.String())
	}
	wantSkipped := []string{
		"ReplicaSet shop/httpbin-7d6b9c8f5 skipped: made by Deployment shop/httpbin, which this input holds",
		"Pod shop/httpbin-7d6b9c8f5-x2x9q skipped: made by ReplicaSet shop/httpbin-7d6b9c8f5, which this input holds",
		"EndpointSlice shop/httpbin-abcde skipped: the lab derives endpoints from its pods and Services",
		"Endpoints shop/httpbin skipped: the lab derives endpoints from its pods and Services",
		"ConfigMap shop/kube-root-ca.crt skipped: Kubernetes writes it into every namespace",
		"ServiceAccount shop/default skipped: Kubernetes makes it in every namespace",
		"Service default/kubernetes skipped: the Kubernetes API server's own Service",
		"Service kube-system/kube-dns skipped: namespace kube-system is the cluster's own machinery",
		"Event shop/httpbin.17a skipped: an event: the cluster's history, not its state",
		"Deployment istio-system/istiod skipped: Istio's own object (istiod, its gateways, their config): the lab runs its own control plane and makes the gateways its Gateways select",
		"ConfigMap shop/istio-ca-root-cert skipped: istiod writes it into every namespace; the lab's CA is its own",
		"ClusterRole default/istiod-clusterrole-istio-system skipped: Istio's own object (istiod, its gateways, their config): the lab runs its own control plane and makes the gateways its Gateways select",
	}
	if !slices.Equal(skipped, wantSkipped) {
		t.Errorf("skipped:\n  %s\nwant:\n  %s", strings.Join(skipped, "\n  "), strings.Join(wantSkipped, "\n  "))
	}

	m, err := sc.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	svc := serviceOf(m, "httpbin.shop.svc.cluster.local")
	if svc == nil || svc.VIP != netip.MustParseAddr("10.96.45.7") {
		t.Errorf("httpbin's VIP = %v, want the cluster's clusterIP 10.96.45.7", svc)
	}
	var pods []string
	for _, p := range m.Pods {
		pods = append(pods, p.Namespace+"/"+p.Workload)
		if !p.Sidecar.Inject {
			t.Errorf("pod %s/%s has no sidecar; the cluster's had one", p.Namespace, p.Name)
		}
	}
	if want := []string{"default/fortio-deploy", "shop/httpbin"}; !slices.Equal(pods, want) {
		t.Errorf("pods of workloads %v, want one each of %v", pods, want)
	}
	if dr := m.Istio.DestinationRules; len(dr) != 1 || dr[0].Spec.GetTrafficPolicy().GetConnectionPool().GetTcp().GetMaxConnections() != 1 {
		t.Errorf("the circuit breaker did not survive: %v", dr)
	}
}

// A clusterIP outside the lab's range is said, and the Service gets one of the range.
func TestClusterIPOutsideServiceRange(t *testing.T) {
	sc := loadDump(t)
	var notes []string
	m, err := sc.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.100.0.0/16"),
		Note: func(s string) { notes = append(notes, s) }})
	if err != nil {
		t.Fatal(err)
	}
	want := "dump.yaml: Service shop/httpbin: spec.clusterIP 10.96.45.7 is outside the lab's service range 10.100.0.0/16 (from 10.100.0.10): the Service gets an address of the range (choose the range with --service-cidr)"
	if !slices.Equal(notes, []string{want}) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	if vip := serviceOf(m, "httpbin.shop.svc.cluster.local").VIP; vip != netip.MustParseAddr("10.100.0.10") {
		t.Errorf("VIP %s, want the range's first 10.100.0.10", vip)
	}
	// Two Services asking for one address: the first in model order keeps it.
	two := "apiVersion: v1\nkind: List\nitems:\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: a}, spec: {clusterIP: 10.96.3.3, selector: {app: a}, ports: [{port: 80}]}}\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: b}, spec: {clusterIP: 10.96.3.3, selector: {app: b}, ports: [{port: 80}]}}\n" +
		"- {apiVersion: meshlab.dev/v1alpha1, kind: Workload, metadata: {name: a}, spec: {labels: {app: a}, ports: [8080]}}\n" +
		"- {apiVersion: meshlab.dev/v1alpha1, kind: Workload, metadata: {name: b}, spec: {labels: {app: b}, ports: [8080]}}\n"
	sc2, err := Load("two.yaml", []byte(two))
	if err != nil {
		t.Fatal(err)
	}
	notes = nil
	m, err = sc2.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
		Note: func(s string) { notes = append(notes, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := serviceOf(m, "a.default.svc.cluster.local").VIP, serviceOf(m, "b.default.svc.cluster.local").VIP; a.String() != "10.96.3.3" || b.String() != "10.96.0.10" {
		t.Errorf("VIPs a=%s b=%s, want 10.96.3.3 and 10.96.0.10", a, b)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "Service default/b: spec.clusterIP 10.96.3.3 is taken by another Service: it gets 10.96.0.10") {
		t.Errorf("notes %q", notes)
	}
}

// Errors in a List's items name the item by its index.
func TestListItemErrors(t *testing.T) {
	data := "apiVersion: v1\nkind: List\nitems:\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: ok}, spec: {selector: {app: a}, ports: [{port: 80}]}}\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: bad}, spec: {selector: {app: a}, ports: [{port: 0}]}}\n" +
		"- just a string\n" +
		"- {apiVersion: v1, kind: Service, metadata: {}}\n" +
		"- {apiVersion: meshlab.dev/v1alpha1, kind: Workload, metadata: {name: a}, spec: {labels: {app: a}, ports: [8080]}}\n" +
		"---\n" +
		"apiVersion: v1\nkind: ServiceList\nitems:\n" +
		"- {apiVersion: v1, kind: Frobnicator, metadata: {name: f}}\n"
	_, err := Load("t.yaml", []byte(data))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Load: %v, want an ErrorList", err)
	}
	got := err.Error()
	for _, want := range []string{
		"t.yaml: document 1 items[1]: Service default/bad: spec.ports[0].port: ",
		"t.yaml: document 1 items[2]: a List's item must be a mapping of fields",
		"t.yaml: document 1 items[3] (Service): metadata.name: is required",
		`t.yaml: document 2 items[0]: Frobnicator default/f: unknown kind "Frobnicator"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "default/ok") {
		t.Errorf("a valid item is reported:\n%s", got)
	}
}

// apply -f of a dump: its objects are created, the cluster's machinery skipped with its
// reason, and delete -f names only what a load keeps.
func TestApplyAndRefsOfList(t *testing.T) {
	data, err := os.ReadFile("testdata/kubectl-get-all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, changes, err := (&Scenario{}).Apply(File{Name: "dump.yaml", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, c := range changes {
		counts[c.Action]++
		if c.Action == ActionSkipped && c.Reason == "" {
			t.Errorf("%s skipped without a reason", c.Ref)
		}
	}
	if counts["created"] != 6 || counts[ActionSkipped] != 12 {
		t.Errorf("changes %v, want 6 created and 12 skipped", counts)
	}
	refs, err := Refs("dump.yaml", "", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 6 || refs[0] != (Ref{Kind: "Namespace", Namespace: "default", Name: "shop"}) {
		t.Errorf("refs %v", refs)
	}
}

// A pod Istio's injector changed loads as its app with the sidecar as its choice.
func TestInjectedPodStripped(t *testing.T) {
	sc := loadDump(t)
	for _, o := range sc.Objects {
		if o.Origin.Kind != "Pod" {
			continue
		}
		if len(o.pods) != 1 || !o.pods[0].Sidecar.Inject || o.pods[0].App.Image != "fortio/fortio:latest_release" {
			t.Errorf("pod %v: %+v", o.Origin, o.pods)
		}
		if strings.Contains(string(o.JSON), "istio-proxy") || strings.Contains(string(o.JSON), `"status"`) {
			t.Errorf("the pod keeps the injector's containers or its status: %s", o.JSON)
		}
	}
}

// A Gateway API Gateway named as istioctl's gateway in istio-system (the secure-metrics
// page's) is the user's object, kept, where istioctl's own objects of that name are
// skipped.
func TestGatewayAPIGatewayInIstioSystemKept(t *testing.T) {
	t.Parallel()
	gw := "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: istio-ingressgateway, namespace: istio-system}\nspec:\n  gatewayClassName: istio\n  listeners: [{name: http, port: 80, protocol: HTTP}]\n"
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: istio-ingressgateway, namespace: istio-system}\nspec: {ports: [{port: 80}]}\n"
	_, changes, err := (&Scenario{}).Apply(File{Name: "g.yaml", Data: []byte(gw + "---\n" + svc)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range changes {
		got[c.Ref.Kind] = c.Action
	}
	if got[GatewayAPIGatewayKind] != "created" || got["Service"] != ActionSkipped {
		t.Fatalf("changes %+v: want the Gateway API Gateway created and istioctl's Service skipped", changes)
	}
}
