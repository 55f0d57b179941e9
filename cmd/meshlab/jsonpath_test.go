package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/api"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testPod(name, ns string, ready bool) corev1.Pod {
	st := corev1.ConditionFalse
	phase := corev1.PodPending
	if ready {
		st, phase = corev1.ConditionTrue, corev1.PodRunning
	}
	return corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "curl"}},
		Status:     corev1.PodStatus{Phase: phase, PodIP: "10.244.0.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// TestJSONPathDocsTemplates runs the templates Istio's docs pass to kubectl over the
// objects the lab's Kubernetes view answers, as kubectl prints them.
func TestJSONPathDocsTemplates(t *testing.T) {
	t.Parallel()
	vip := corev1.LoadBalancerIPModeVIP
	ingress := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "istio-ingressgateway", Namespace: "istio-system"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.12", Ports: []corev1.ServicePort{
			{Name: "status-port", Port: 15021, TargetPort: intstr.FromInt32(15021)},
			{Name: "http2", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)},
		}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.96.0.12", IPMode: &vip}}}},
	}
	ip := gwv1.IPAddressType
	gtw := gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: "httpbin-gateway", Namespace: "default"},
		Status:     gwv1.GatewayStatus{Addresses: []gwv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.0.20"}}},
	}
	pods := []json.RawMessage{mustJSON(t, testPod("curl-5b549b49b8-m2hmt", "foo", true)), mustJSON(t, testPod("curl-5b549b49b8-x9k2p", "bar", false))}
	for _, tc := range []struct {
		name, tmpl string
		asJSON     bool
		items      []json.RawMessage
		list       bool
		want       string
	}{
		{name: "pod names of a selector", tmpl: "{.items..metadata.name}", items: pods, list: true, want: "curl-5b549b49b8-m2hmt curl-5b549b49b8-x9k2p"},
		{name: "one pod's list", tmpl: "{.items..metadata.name}", items: pods[:1], list: true, want: "curl-5b549b49b8-m2hmt"},
		{name: "empty list", tmpl: "{.items..metadata.name}", list: true, want: ""},
		{name: "load balancer ip", tmpl: "{.status.loadBalancer.ingress[0].ip}", items: []json.RawMessage{mustJSON(t, ingress)}, want: "10.96.0.12"},
		{name: "http2 port", tmpl: `{.spec.ports[?(@.name=="http2")].port}`, items: []json.RawMessage{mustJSON(t, ingress)}, want: "80"},
		{name: "https port", tmpl: `{.spec.ports[?(@.name=="https")].port}`, items: []json.RawMessage{mustJSON(t, ingress)}, want: "443"},
		{name: "numeric filter", tmpl: `{.spec.ports[?(@.port==443)].name}`, items: []json.RawMessage{mustJSON(t, ingress)}, want: "https"},
		{name: "gateway api address", tmpl: "{.status.addresses[0].value}", items: []json.RawMessage{mustJSON(t, gtw)}, want: "10.96.0.20"},
		{name: "missing key prints nothing", tmpl: "{.status.loadBalancer.ingress[0].hostname}", items: []json.RawMessage{mustJSON(t, ingress)}, want: ""},
		{name: "range", tmpl: `{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.phase}{"\n"}{end}`, items: pods, list: true, want: "foo/curl-5b549b49b8-m2hmt Running\nbar/curl-5b549b49b8-x9k2p Pending\n"},
		{name: "as json", tmpl: "{.spec.ports[1]}", asJSON: true, items: []json.RawMessage{mustJSON(t, ingress)}, want: "[\n    {\n        \"name\": \"http2\",\n        \"port\": 80,\n        \"targetPort\": 8080\n    }\n]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := newJSONPathPrinter(tc.tmpl, tc.asJSON)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := p.print(&out, tc.items, tc.list); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("%s printed %q, want %q", tc.tmpl, out.String(), tc.want)
			}
		})
	}
}

func TestJSONPathOutputForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format, tmpl, err string
		asJSON, ok        bool
	}{
		{format: "json"},
		{format: "", ok: false},
		{format: "jsonpath={.items..metadata.name}", tmpl: "{.items..metadata.name}", ok: true},
		{format: "jsonpath-as-json={.spec}", tmpl: "{.spec}", asJSON: true, ok: true},
		{format: "jsonpath", ok: true, err: "-o jsonpath: needs a template"},
		{format: "jsonpath-file=/nonexistent/t.txt", ok: true, err: "-o jsonpath-file: open /nonexistent/t.txt"},
	} {
		tmpl, asJSON, ok, err := jsonpathOutput(tc.format)
		if tmpl != tc.tmpl || asJSON != tc.asJSON || ok != tc.ok || (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("jsonpathOutput(%q) = %q, %v, %v, %v; want %q, %v, %v, error %q", tc.format, tmpl, asJSON, ok, err, tc.tmpl, tc.asJSON, tc.ok, tc.err)
		}
	}
	if _, err := newJSONPathPrinter("{.items[", false); err == nil || !strings.Contains(err.Error(), `parse template "{.items["`) {
		t.Fatalf("a bad template: %v", err)
	}
}

func TestWaitForConditions(t *testing.T) {
	t.Parallel()
	decode := func(v any) any {
		t.Helper()
		o, err := decodeUnstructured(mustJSON(t, v))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	readyPod, pendingPod := decode(testPod("a", "foo", true)), decode(testPod("b", "foo", false))
	deploy := decode(appsv1.Deployment{Status: appsv1.DeploymentStatus{ReadyReplicas: 2, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}})
	gtw := decode(gwv1.Gateway{Status: gwv1.GatewayStatus{Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue}}}})
	for _, tc := range []struct {
		spec string
		obj  any
		want bool
	}{
		{"condition=ready", readyPod, true},
		{"condition=Ready", pendingPod, false},
		{"condition=Ready=false", pendingPod, true},
		{"condition=available", deploy, true},
		{"condition=programmed", gtw, true},
		{"condition=accepted", gtw, false},
		{"jsonpath={.status.phase}=Running", readyPod, true},
		{"jsonpath={.status.phase}=Running", pendingPod, false},
		{"jsonpath={.status.readyReplicas}=2", deploy, true},
		{"jsonpath={.status.readyReplicas}=3", deploy, false},
		{"jsonpath={.status.podIP}", readyPod, true},
		{"jsonpath=.status.phase=Pending", pendingPod, true},
	} {
		w, err := parseWaitFor(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got, err := w.met(tc.obj); err != nil || got != tc.want {
			t.Errorf("--for=%s: met %v (%v), want %v", tc.spec, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "ready", "condition=", "jsonpath={.status[", "create"} {
		if _, err := parseWaitFor(bad); err == nil {
			t.Errorf("--for=%q was accepted", bad)
		}
	}
}

func TestWaitTargets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		selecting bool
		want      []waitTarget
		err       string
	}{
		{args: []string{"gtw/httpbin-gateway"}, want: []waitTarget{{"gtw", "httpbin-gateway"}}},
		{args: []string{"deploy/a", "pod/b"}, want: []waitTarget{{"deploy", "a"}, {"pod", "b"}}},
		{args: []string{"pod", "a", "b"}, want: []waitTarget{{"pod", "a"}, {"pod", "b"}}},
		{args: []string{"pod"}, selecting: true, want: []waitTarget{{"pod", ""}}},
		{args: []string{"pod"}, err: "wait pod: name the objects"},
		{args: []string{"deploy/a", "b"}, err: `wait: "b": want TYPE/NAME`},
	} {
		got, err := parseWaitTargets(tc.args, tc.selecting)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%v: %v, want %v", tc.args, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%v: %v, want %v", tc.args, got, tc.want)
			}
		}
	}
}

// fakeKube is a lab whose pods become ready after a number of looks.
type fakeKube struct {
	looks   atomic.Int32
	readyAt int32 // the look from which the pods are ready; 0: never
	pods    []corev1.Pod
}

func (f *fakeKube) list(_ context.Context, kind, namespace, name, selector string) ([]api.KubeObject, error) {
	if !isPodsKind(kind) {
		return nil, errors.New("unknown kind")
	}
	n := f.looks.Add(1)
	var out []api.KubeObject
	for _, p := range f.pods {
		if (namespace != "" && p.Namespace != namespace) || (name != "" && p.Name != name) || (selector != "" && selector != "app="+p.Labels["app"]) {
			continue
		}
		ready := f.readyAt > 0 && n >= f.readyAt
		pod := testPod(p.Name, p.Namespace, ready)
		b, err := json.Marshal(pod)
		if err != nil {
			return nil, err
		}
		out = append(out, api.KubeObject{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Object: b})
	}
	return out, nil
}

func TestRunWait(t *testing.T) {
	t.Parallel()
	ready, err := parseWaitFor("condition=ready")
	if err != nil {
		t.Fatal(err)
	}
	pods := []corev1.Pod{testPod("curl-1", "foo", false), testPod("curl-2", "bar", false)}
	cfg := func(timeout time.Duration) *waitConfig {
		return &waitConfig{selector: "app=curl", timeout: timeout, interval: 5 * time.Millisecond}
	}

	f := &fakeKube{readyAt: 4, pods: pods}
	var out strings.Builder
	if err := runWait(t.Context(), f.list, nil, cfg(5*time.Second), ready, []waitTarget{{kind: "pod"}}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "pod/curl-1 condition met\npod/curl-2 condition met\n" {
		t.Fatalf("printed %q", out.String())
	}
	if f.looks.Load() < 4 {
		t.Fatalf("met after %d looks, before the pods were ready", f.looks.Load())
	}

	start := time.Now()
	err = runWait(t.Context(), (&fakeKube{pods: pods}).list, nil, cfg(100*time.Millisecond), ready, []waitTarget{{kind: "pod"}}, &out)
	if !errors.Is(err, errWaitTimeout) || err.Error() != "timed out waiting for the condition on pods/curl-1" {
		t.Fatalf("never ready: %v", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 3*time.Second {
		t.Fatalf("timeout 100ms took %s", took)
	}

	if err := runWait(t.Context(), (&fakeKube{pods: pods}).list, nil, cfg(time.Second), ready, []waitTarget{{kind: "pod", name: "curl-9"}}, &out); err == nil || err.Error() != `pod "curl-9" not found` {
		t.Fatalf("an unknown name: %v", err)
	}
	c := cfg(time.Second)
	c.selector = "app=none"
	if err := runWait(t.Context(), (&fakeKube{pods: pods}).list, nil, c, ready, []waitTarget{{kind: "pod"}}, &out); err == nil || err.Error() != "no matching resources found" {
		t.Fatalf("a selector matching nothing: %v", err)
	}
	del, err := parseWaitFor("delete")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runWait(t.Context(), (&fakeKube{}).list, nil, cfg(time.Second), del, []waitTarget{{kind: "pod", name: "gone"}}, &out); err != nil || out.String() != "" {
		t.Fatalf("delete of what is gone: %v, %q", err, out.String())
	}
}

func TestResourceNames(t *testing.T) {
	t.Parallel()
	// The lab's discovery, as GET /v1/kinds answers it (lab.TestKindsAreConfigs holds
	// the lab's answer to controlplane/config's table).
	kinds := api.Kinds{
		{Kind: "Deployment", Group: "apps", Names: []string{"deploy", "deployment", "deployments"}},
		{Kind: api.GatewayAPIGatewayKind, Group: "gateway.networking.k8s.io", Names: []string{"gtw", "gateway.gateway.networking.k8s.io"}},
		{Kind: "Service", Names: []string{"service", "services", "svc"}},
		{Kind: "AuthorizationPolicy", Group: "security.istio.io", Names: []string{"ap", "authorizationpolicy"}},
		{Kind: "ServiceEntry", Group: "networking.istio.io", Names: []string{"se", "serviceentry"}},
	}
	for kind, want := range map[string]string{"pod": "pod", "deploy": "deployment.apps", "gtw": "gateway.gateway.networking.k8s.io", "svc": "service", "ap": "authorizationpolicy.security.istio.io", "nope": "nope"} {
		if got := resourceName(kinds, kind, false); got != want {
			t.Errorf("resourceName(%s) = %s, want %s", kind, got, want)
		}
	}
	for kind, want := range map[string]string{"po": "pods", "deployment": "deployments", "gtw": "gateways", "ap": "authorizationpolicies", "se": "serviceentries"} {
		if got := resourceName(kinds, kind, true); got != want {
			t.Errorf("resourceName(%s, plural) = %s, want %s", kind, got, want)
		}
	}
}
