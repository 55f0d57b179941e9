package config

import "testing"

// Istio's grpc-agent injection template (inject.istio.io/templates) marks a pod
// proxyless, on a Kubernetes pod template and on a Workload; a pod without injection is
// never proxyless.
func TestGRPCAgentTemplate(t *testing.T) {
	t.Parallel()
	deploy := func(name, ns, annotations string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" +
			"  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}, annotations: {" + annotations + "}}\n" +
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n"
	}
	m := buildScenario(t, docs(
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: nomesh, labels: {istio-injection: disabled}}\n",
		deploy("a", "default", "inject.istio.io/templates: grpc-agent"),
		deploy("b", "default", "inject.istio.io/templates: 'sidecar, grpc-agent'"),
		deploy("c", "default", "inject.istio.io/templates: sidecar"),
		deploy("d", "nomesh", "inject.istio.io/templates: grpc-agent"),
		"apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: w, annotations: {inject.istio.io/templates: grpc-agent}}\nspec: {labels: {app: w}}\n",
	))
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false, "w": true} {
		pods := podsOf(m, name)
		if len(pods) != 1 {
			t.Fatalf("%s: %d pods", name, len(pods))
		}
		if got := pods[0].Sidecar.GRPCAgent; got != want {
			t.Errorf("workload %s: grpc-agent %v, want %v", name, got, want)
		}
	}
}
