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
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want %q", err, want)
		}
	}
}

// The otel-provider page's mesh config (an envoyOtelAls provider, defaultProviders) and
// Telemetry naming it load; a provider without a service, a port out of range or a
// default naming no provider are refused by field.
func TestLoadOTelAccessLogProvider(t *testing.T) {
	t.Parallel()
	const page = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  accessLogFile: /dev/stdout
  extensionProviders:
  - name: otel
    envoyOtelAls:
      service: opentelemetry-collector.istio-system.svc.cluster.local
      port: 4317
      logFormat: {labels: {path: "%REQ(:PATH)%"}}
  defaultProviders:
    accessLogging: [envoy, otel]
---
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata: {name: sleep-logging}
spec:
  selector: {matchLabels: {app: sleep}}
  accessLogging:
  - providers:
    - name: otel
`
	s, err := Load("t.yaml", []byte(page))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	p, ok := m.Mesh.OTelAccessLogProvider("otel")
	if !ok || p.Service != "opentelemetry-collector.istio-system.svc.cluster.local" || p.Port != 4317 || p.Labels["path"] != "%REQ(:PATH)%" ||
		strings.Join(m.Mesh.DefaultAccessLogProviders, ",") != "envoy,otel" {
		t.Fatalf("mesh: %+v", m.Mesh)
	}
	const bad = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  extensionProviders:
  - name: otel
    envoyOtelAls: {port: 70000}
  defaultProviders:
    accessLogging: [nope]
`
	_, err = Load("t.yaml", []byte(bad))
	for _, want := range []string{
		"spec.extensionProviders[0].envoyOtelAls.service: is required",
		"spec.extensionProviders[0].envoyOtelAls.port:",
		`spec.defaultProviders.accessLogging[0]: "nope" is not a provider of the mesh config`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want %q", err, want)
		}
	}
}
