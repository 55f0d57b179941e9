package config

import (
	"strings"
	"testing"
)

// The Access Logs task's Telemetry (mesh-wide, Istio's built-in envoy provider) loads
// into the model; what the lab does not build is refused by name.
func TestLoadTelemetry(t *testing.T) {
	t.Parallel()
	const task = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  accessLogging:
    - providers:
      - name: envoy
---
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata: {name: quiet}
spec:
  selector: {matchLabels: {app: backend}}
  accessLogging: [{disabled: true}]
`
	s, err := Load("t.yaml", []byte(task))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(m.Istio.Telemetries) != 2 || m.Istio.Telemetries[0].Name != "quiet" || m.Istio.Telemetries[1].Namespace != "istio-system" {
		t.Fatalf("Telemetries = %v", m.Istio.Telemetries)
	}
	const refused = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: t}
spec:
  tracing: [{randomSamplingPercentage: 10, match: {mode: CLIENT}}]
  metrics:
  - providers: [{name: stackdriver}]
    overrides:
    - match: {customMetric: my_metric}
      tagOverrides:
        a: {operation: UPSERT}
        b: {operation: REMOVE, value: x}
  accessLogging:
  - providers: [{name: otel}]
    filter: {expression: "response.code >= 400"}
`
	_, err = Load("t.yaml", []byte(refused))
	for _, want := range []string{
		"spec.tracing[0].match: is not supported by meshlab",
		`spec.metrics[0].providers[0].name: "stackdriver" is not a metrics provider of the lab`,
		"spec.metrics[0].overrides[0].match.customMetric: is not supported by meshlab",
		"spec.metrics[0].overrides[0].tagOverrides[a].value: must be set when operation is UPSERT",
		"spec.metrics[0].overrides[0].tagOverrides[b].value: may only be set when operation is UPSERT",
		"spec.accessLogging[0].filter: is not supported by meshlab",
		`spec.accessLogging[0].providers[0].name: "otel" is not an access log provider of the lab`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want %q", err, want)
		}
	}
}
