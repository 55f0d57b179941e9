package lab

import (
	"strings"
	"testing"
)

// A scenario with a grpc-agent pod is refused with a message naming the pod and the
// annotation, rather than started as a sidecar pod its proxy could not serve.
func TestProxylessPodsRefusedUntilRun(t *testing.T) {
	t.Parallel()
	yaml := "apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: echo, annotations: {inject.istio.io/templates: grpc-agent}}\nspec: {labels: {app: echo}, ports: [17070]}\n"
	err := Validate(Options{Name: "grpcrefuse", ScenarioFile: "grpc.yaml", ScenarioData: []byte(yaml)})
	if err == nil || !strings.Contains(err.Error(), "pod default/echo") || !strings.Contains(err.Error(), "grpc-agent") {
		t.Fatalf("Validate: %v, want a refusal naming pod default/echo and the grpc-agent template", err)
	}
	plain := strings.Replace(yaml, ", annotations: {inject.istio.io/templates: grpc-agent}", "", 1)
	if err := Validate(Options{Name: "grpcrefuse", ScenarioFile: "grpc.yaml", ScenarioData: []byte(plain)}); err != nil {
		t.Fatalf("Validate without the annotation: %v", err)
	}
}
