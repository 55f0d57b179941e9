package config

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// defaultConfig.tracing as Istio's helm values write it with global.proxy.tracer=zipkin
// (zipkin.address) and the sampling page's fields load into the mesh's proxy tracing;
// a bad address and a tag of no kind are refused by field; lightstep is refused by name.
func TestLoadProxyTracing(t *testing.T) {
	t.Parallel()
	const page = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  enableTracing: true
  defaultConfig:
    tracing:
      sampling: 10
      maxPathTagLength: 64
      enableIstioTags: false
      zipkin: {address: zipkin.istio-system:9411}
      customTags:
        lit: {literal: {value: v}}
        env: {environment: {name: POD_NAME, defaultValue: x}}
        hdr: {header: {name: x-user}}
`
	s, err := Load("t.yaml", []byte(page))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	got := m.Mesh.Tracing
	want := model.ProxyTracing{ZipkinAddress: "zipkin.istio-system:9411", MaxPathTagLength: 64, NoIstioTags: true,
		CustomTags: map[string]model.ProxyTracingTag{"lit": {Literal: "v"}, "env": {Environment: "POD_NAME", Default: "x"}, "hdr": {Header: "x-user"}}}
	if got.Off || got.Sampling != 10 || got.Default.ZipkinAddress != want.ZipkinAddress || got.Default.MaxPathTagLength != 64 ||
		!got.Default.NoIstioTags || len(got.Default.CustomTags) != 3 || got.Default.CustomTags["env"] != want.CustomTags["env"] ||
		got.Default.CustomTags["hdr"] != want.CustomTags["hdr"] || got.Default.CustomTags["lit"] != want.CustomTags["lit"] {
		t.Fatalf("mesh tracing %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ spec, want string }{
		{`{zipkin: {address: zipkin.istio-system}}`, `spec.defaultConfig.tracing.zipkin.address: "zipkin.istio-system" is not host:port`},
		{`{zipkin: {address: "zipkin:0"}}`, `spec.defaultConfig.tracing.zipkin.address: port 0 is out of range`},
		{`{zipkin: {}}`, `spec.defaultConfig.tracing.zipkin.address: is required`},
		{`{customTags: {x: {}}}`, `spec.defaultConfig.tracing.customTags[x]: needs one of literal, environment or header`},
		{`{lightstep: {address: "ls:8080"}}`, `spec.defaultConfig.tracing.lightstep: is not supported by meshlab`},
		{`{tlsSettings: {mode: SIMPLE}}`, `spec.defaultConfig.tracing.tlsSettings: is not supported by meshlab`},
	} {
		doc := "apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec:\n  defaultConfig:\n    tracing: " + tc.spec + "\n"
		if _, err := Load("t.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tracing %s: Load = %v, want %q", tc.spec, err, tc.want)
		}
	}
}
