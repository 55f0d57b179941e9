package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/kubeedit"
)

// gatewayView is the Deployment the lab shows for istioctl's ingress gateway (no
// template annotations, no containers: patchGatewayK8s puts the install's k8s there).
const gatewayView = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"istio-ingressgateway","namespace":"istio-system"},"spec":{"replicas":1,"template":{"metadata":{"labels":{"app":"istio-ingressgateway","istio":"ingressgateway"}}}}}`

// The secure-metrics page's strategic patch of deployment istio-ingressgateway.
const secureMetricsGatewayPatch = `spec:
  template:
    metadata:
      annotations:
        prometheus.istio.io/secure-port: "15092"
        prometheus.io/path: "/stats/prometheus"
    spec:
      containers:
      - name: istio-proxy
        env:
        - name: ENVOY_SECURE_METRICS_PORT
          value: "15091"
        - name: ENVOY_SECURE_MERGED_METRICS_PORT
          value: "15092"
`

// TestPatchGatewayK8s: the page's strategic patch of istioctl's gateway Deployment gives
// the install's k8s settings its annotations and istio-proxy's env, merged with those the
// install has (env by name, in apimachinery's strategic merge order); patching the same again is no
// change; anything but the template's annotations and istio-proxy's env is refused by
// field.
func TestPatchGatewayK8s(t *testing.T) {
	t.Parallel()
	view := func() map[string]any {
		var v map[string]any
		if err := json.Unmarshal([]byte(gatewayView), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	patch, err := kubeedit.ParsePatch([]byte(secureMetricsGatewayPatch))
	if err != nil {
		t.Fatal(err)
	}
	typ, _ := kubeedit.ParsePatchType("strategic")
	have := map[string]any{"podAnnotations": map[string]any{"a": "b"}, "env": []any{map[string]any{"name": "ENVOY_SECURE_METRICS_PORT", "value": "1"}, map[string]any{"name": "OTHER", "value": "x"}}}
	out, changed, err := patchGatewayK8s(view(), have, patch, typ, "deployment.apps/istio-ingressgateway", "istio-system")
	if err != nil || !changed {
		t.Fatalf("the page's patch: changed %v, %v", changed, err)
	}
	got, _ := json.Marshal(out)
	if want := `{"env":[{"name":"ENVOY_SECURE_METRICS_PORT","value":"15091"},{"name":"ENVOY_SECURE_MERGED_METRICS_PORT","value":"15092"},{"name":"OTHER","value":"x"}],"podAnnotations":{"a":"b","prometheus.io/path":"/stats/prometheus","prometheus.istio.io/secure-port":"15092"}}`; string(got) != want {
		t.Errorf("k8s after the page's patch:\n%s\nwant\n%s", got, want)
	}
	if _, changed, err := patchGatewayK8s(view(), out, patch, typ, "deployment.apps/istio-ingressgateway", "istio-system"); err != nil || changed {
		t.Errorf("the page's patch again: changed %v, %v; want no change", changed, err)
	}
	merge, _ := kubeedit.ParsePatchType("merge")
	for _, tc := range []struct{ patch, want string }{
		{`{"spec":{"replicas":3}}`, "spec.replicas: deployment.apps/istio-ingressgateway in istio-system is made by the lab, which keeps only the pod template's annotations and the istio-proxy container's env"},
		{`{"spec":{"template":{"spec":{"containers":[{"name":"istio-proxy","image":"x"}]}}}}`, "spec.template.spec.containers[name=istio-proxy].image: deployment.apps/istio-ingressgateway in istio-system is made by the lab"},
		{`{"spec":{"template":{"spec":{"containers":[{"name":"other"}]}}}}`, "spec.template.spec.containers[0].name: deployment.apps/istio-ingressgateway in istio-system is made by the lab"},
		{`{"spec":{"template":{"metadata":{"annotations":{"a":1}}}}}`, "spec.template.metadata.annotations.a: deployment.apps/istio-ingressgateway in istio-system is made by the lab, which keeps only the pod template's annotations and the istio-proxy container's env of a patch to it (a string)"},
		{`{"spec":{"template":{"metadata":{"labels":{"x":"y"}}}}}`, "spec.template.metadata.labels.x: deployment.apps/istio-ingressgateway"},
	} {
		p, err := kubeedit.ParsePatch([]byte(tc.patch))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := patchGatewayK8s(view(), nil, p, merge, "deployment.apps/istio-ingressgateway", "istio-system"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.patch, err, tc.want)
		}
	}
}

// FuzzPatchGatewayK8s: no patch of the gateway's Deployment makes patchGatewayK8s panic,
// and what it accepts is k8s settings of string annotations and named env entries.
func FuzzPatchGatewayK8s(f *testing.F) {
	f.Add(secureMetricsGatewayPatch, "strategic")
	f.Add(`{"spec":{"template":{"metadata":{"annotations":null}}}}`, "merge")
	f.Add(`[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"A"}]}]`, "json")
	f.Fuzz(func(t *testing.T, text, typName string) {
		typ, err := kubeedit.ParsePatchType(typName)
		if err != nil {
			return
		}
		patch, err := kubeedit.ParsePatch([]byte(text))
		if err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(gatewayView), &v); err != nil {
			t.Fatal(err)
		}
		out, changed, err := patchGatewayK8s(v, nil, patch, typ, "deployment.apps/istio-ingressgateway", "istio-system")
		if err != nil || !changed {
			return
		}
		if a, ok := out["podAnnotations"].(map[string]any); ok {
			for k, s := range a {
				if _, ok := s.(string); !ok {
					t.Fatalf("accepted annotation %s = %v", k, s)
				}
			}
		}
		if env, ok := out["env"].([]any); ok {
			for _, e := range env {
				if m, _ := e.(map[string]any); m["name"] == nil || m["name"] == "" {
					t.Fatalf("accepted env entry %v", e)
				}
			}
		}
	})
}
