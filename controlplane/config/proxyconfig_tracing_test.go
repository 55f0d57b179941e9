package config

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// proxyConfigTracingScenario is a mesh with defaultConfig.tracing and two Deployments, one
// of whose pods carries a proxy.istio.io/config tracing (annotation is its value).
func proxyConfigTracingScenario(annotation string) string {
	return `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  defaultConfig:
    tracing:
      sampling: 10
      zipkin: {address: zipkin.istio-system:9411}
      customTags:
        mesh: {literal: {value: m}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: plain, namespace: default}
spec:
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec: {containers: [{name: app, image: meshlab/demoapp}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: annotated, namespace: default}
spec:
  selector: {matchLabels: {app: annotated}}
  template:
    metadata:
      labels: {app: annotated}
      annotations:
        proxy.istio.io/config: |
` + indent(annotation, "          ") + `
    spec: {containers: [{name: app, image: meshlab/demoapp}]}
`
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// A pod's proxy.istio.io/config tracing replaces the mesh's defaultConfig.tracing for
// that pod's proxy, whole (Istio's MergeProxyConfig sets each top-level field the
// annotation names): what it leaves out is unset. A pod without one keeps the mesh's,
// and an annotation without tracing (holdApplicationUntilProxyStarts) leaves it alone.
func TestProxyConfigAnnotationTracing(t *testing.T) {
	t.Parallel()
	load := func(t *testing.T, annotation string) *model.Model {
		t.Helper()
		s, err := Load("t.yaml", []byte(proxyConfigTracingScenario(annotation)))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		m, err := s.Build(defaultOpts)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		return m
	}
	pod := func(t *testing.T, m *model.Model, app string) *model.Pod {
		t.Helper()
		for _, p := range m.Pods {
			if p.Labels["app"] == app {
				return p
			}
		}
		t.Fatalf("no pod of %s", app)
		return nil
	}
	m := load(t, `tracing:
  sampling: 50
  maxPathTagLength: 99
  zipkin: {address: "$(HOST_IP):9411"}
  custom_tags:
    pod: {header: {name: x-user, defaultValue: none}}`)
	got := m.Mesh.Tracing.For(pod(t, m, "annotated"))
	if got.Sampling != 50 || got.MaxPathTagLength != 99 || got.ZipkinAddress != "$(HOST_IP):9411" || got.NoIstioTags ||
		len(got.CustomTags) != 1 || got.CustomTags["pod"] != (model.ProxyTracingTag{Header: "x-user", Default: "none"}) {
		t.Errorf("annotated pod's tracing %+v, want the annotation's only", got)
	}
	plain := m.Mesh.Tracing.For(pod(t, m, "plain"))
	if plain.Sampling != 10 || plain.ZipkinAddress != "zipkin.istio-system:9411" || len(plain.CustomTags) != 1 || plain.CustomTags["mesh"].Literal != "m" {
		t.Errorf("plain pod's tracing %+v, want the mesh's", plain)
	}
	m = load(t, `holdApplicationUntilProxyStarts: true`)
	if p := pod(t, m, "annotated"); p.Sidecar.Tracing != nil || m.Mesh.Tracing.For(p).Sampling != 10 {
		t.Errorf("an annotation without tracing: pod's tracing %+v, want the mesh's", m.Mesh.Tracing.For(p))
	}
	m = load(t, `tracing: {enableIstioTags: false}`)
	if got := m.Mesh.Tracing.For(pod(t, m, "annotated")); got.Sampling != 0 || got.ZipkinAddress != "" || !got.NoIstioTags || len(got.CustomTags) != 0 {
		t.Errorf("tracing {enableIstioTags: false}: %+v, want nothing of the mesh's", got)
	}

	field := "spec.template.metadata.annotations[proxy.istio.io/config].tracing"
	for _, tc := range []struct{ annotation, want string }{
		{`tracing: {zipkin: {address: zipkin}}`, field + `.zipkin.address: "zipkin" is not host:port`},
		{`tracing: {sampling: 101}`, field + `.sampling: 101 is not a percentage`},
		{`tracing: {customTags: {x: {}}}`, field + `.customTags[x]: needs one of literal, environment or header`},
		{`tracing: {datadog: {address: "dd:8126"}}`, field + `.datadog: is not supported by meshlab: meshlab's proxies have no Datadog tracer`},
		{`tracing: {tlsSettings: {mode: SIMPLE}}`, field + `.tlsSettings: is not supported by meshlab`},
		{`tracing: {samplng: 5}`, field + `: `},
		{`tracing: 5`, field + `: `},
		{`[a, b]`, field + `: is not a ProxyConfig`},
	} {
		_, err := Load("t.yaml", []byte(proxyConfigTracingScenario(tc.annotation)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("annotation %s: Load = %v, want %q", tc.annotation, err, tc.want)
		}
	}
}

// FuzzProxyConfigTracing holds the annotation's reader to what the checks promise: it
// never panics, what the check accepts the model takes, and what it refuses leaves the
// pod on the mesh's tracing.
func FuzzProxyConfigTracing(f *testing.F) {
	for _, s := range []string{
		"tracing: {sampling: 50}", "tracing:\n  zipkin: {address: \"$(HOST_IP):9411\"}\n", "tracing: {customTags: {a: {literal: {value: b}}}}",
		"holdApplicationUntilProxyStarts: true", "tracing: null", "tracing: [1]", "[", "{", "tracing: {lightstep: {}}", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ann := map[string]string{proxyConfigAnnotation: v}
		var list ErrorList
		checkProxyConfigTracing(ann, "a", problems{list: &list})
		got := proxyConfigTracing(ann)
		tr, err := annotationTracing(ann)
		if err != nil && (got != nil || len(list) == 0) {
			t.Fatalf("%q: does not parse (%v), yet the model took %+v or the check passed (%v)", v, err, got, list)
		}
		if err == nil && (tr == nil) != (got == nil) {
			t.Fatalf("%q: tracing %v, model %+v", v, tr, got)
		}
		if got != nil && got.Sampling != tr.GetSampling() {
			t.Fatalf("%q: sampling %v, want %v", v, got.Sampling, tr.GetSampling())
		}
	})
}
