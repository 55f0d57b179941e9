package config

import (
	"strings"
	"testing"
	"time"
)

// The opentelemetry page's providers (its http one, resource_detectors written in snake
// case as the page writes it) load into the mesh's tracing providers; a provider without
// a service, a header without a name, a header from istiod's environment and a sampler
// are refused by field.
func TestLoadOTelTracingProvider(t *testing.T) {
	t.Parallel()
	const page = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  enableTracing: true
  extensionProviders:
  - name: otel-tracing
    opentelemetry:
      port: 4318
      service: opentelemetry-collector.observability.svc.cluster.local
      http:
        path: "/v1/traces"
        timeout: 5s
        headers:
          - name: "custom-header"
            value: "custom value"
      resource_detectors:
        environment: {}
  - name: otel-grpc
    opentelemetry:
      port: 4317
      service: opentelemetry-collector.observability.svc.cluster.local
      grpc: {timeout: 3s, initialMetadata: [{name: x-tenant, value: lab}]}
`
	s, err := Load("t.yaml", []byte(page))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	p, ok := m.Mesh.Tracing.OTelProvider("otel-tracing")
	if !ok || p.Service != "opentelemetry-collector.observability.svc.cluster.local" || p.Port != 4318 || !p.EnvironmentDetector ||
		p.HTTP == nil || p.HTTP.Path != "/v1/traces" || p.HTTP.Timeout != 5*time.Second || !p.HTTP.HasTimeout || len(p.HTTP.Headers) != 1 || p.HTTP.Headers[0] != [2]string{"custom-header", "custom value"} {
		t.Fatalf("otel-tracing: %+v (http %+v)", p, p.HTTP)
	}
	g, ok := m.Mesh.Tracing.OTelProvider("otel-grpc")
	if !ok || g.HTTP != nil || g.GRPCTimeout != 3*time.Second || len(g.GRPCMetadata) != 1 || g.EnvironmentDetector {
		t.Fatalf("otel-grpc: %+v", g)
	}
	const bad = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  extensionProviders:
  - name: a
    opentelemetry: {port: 4317, http: {headers: [{value: v}]}}
  - name: b
    opentelemetry: {port: 4317, service: c, http: {headers: [{name: h, envName: TOKEN}]}}
  - name: c
    opentelemetry: {port: 4317, service: c, dynatraceSampler: {tenant: t}}
`
	_, err = Load("bad.yaml", []byte(bad))
	for _, want := range []string{
		"spec.extensionProviders[0].opentelemetry.service: is required",
		"spec.extensionProviders[0].opentelemetry.http.headers[0].name: is required",
		"spec.extensionProviders[1].opentelemetry.http.headers[0].envName: is not supported by meshlab",
		"spec.extensionProviders[2].opentelemetry.dynatraceSampler: is not supported by meshlab",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want %q", err, want)
		}
	}
}
