package config

import (
	"encoding/json"
	"errors"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The tracing of a pod's proxy.istio.io/config annotation. Istio's injector merges the
// annotation over the mesh's defaultConfig (mesh.MergeProxyConfig) and hands the result
// to pilot-agent (PROXY_CONFIG), which writes the bootstrap's tracer from it and sends it
// to istiod in the node's metadata, whose legacy tracing (no Telemetry tracing) then reads
// its sampling, custom tags and maxPathTagLength for that proxy's connection managers.
// The merge sets each top-level field the annotation names, so its tracing replaces the
// mesh's whole (model.MeshTracing.For).

// annotationTracing is the tracing of annotations' proxy.istio.io/config, nil when it has
// none (no annotation, or one without tracing).
func annotationTracing(annotations map[string]string) (*meshv1alpha1.Tracing, error) {
	v, ok := annotations[proxyConfigAnnotation]
	if !ok {
		return nil, nil
	}
	js, err := yaml.YAMLToJSON([]byte(v))
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, errors.New("is not a ProxyConfig (a YAML map of its fields)")
	}
	raw, ok := top["tracing"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	t := &meshv1alpha1.Tracing{}
	if err := protojson.Unmarshal(raw, t); err != nil {
		return nil, err
	}
	return t, nil
}

// checkProxyConfigTracing refuses, in a pod template's annotations (at field), a
// proxy.istio.io/config tracing that does not parse, whose checks the mesh's
// defaultConfig.tracing would fail, or that names a tracer meshlab's proxies lack.
func checkProxyConfigTracing(annotations map[string]string, field string, p problems) {
	f := field + "[" + proxyConfigAnnotation + "].tracing"
	t, err := annotationTracing(annotations)
	if err != nil {
		p.addf(f, "%v", err)
		return
	}
	if t == nil {
		return
	}
	checkProxyTracing(t, f, p) // meshconfig_tracing_default.go
	if s := t.GetSampling(); s < 0 || s > 100 {
		p.addf(f+".sampling", "%g is not a percentage (0-100)", s)
	}
	for _, r := range []struct {
		name string
		set  bool
		why  string
	}{
		{"lightstep", t.GetLightstep() != nil, "no Lightstep tracer"},
		{"datadog", t.GetDatadog() != nil, "no Datadog tracer"},
		{"stackdriver", t.GetStackdriver() != nil, "no Stackdriver tracer"},
		{"openCensusAgent", t.GetOpenCensusAgent() != nil, "no OpenCensus tracer (Envoy removed it)"},
		{"tlsSettings", t.GetTlsSettings() != nil, "no TLS to the bootstrap's Zipkin collector"},
	} {
		if r.set {
			p.addf(f+"."+r.name, "is not supported by meshlab: meshlab's proxies have %s; use zipkin: {address: zipkin.istio-system:9411} (samples/addons/extras/zipkin.yaml)", r.why)
		}
	}
}

// proxyConfigTracing is the tracing of a pod template's proxy.istio.io/config annotation
// as the pod's proxy config holds it (model.SidecarSpec.Tracing), nil when it names none
// (or does not parse: checkProxyConfigTracing refused that).
func proxyConfigTracing(annotations map[string]string) *model.ProxyTracing {
	t, err := annotationTracing(annotations)
	if err != nil || t == nil {
		return nil
	}
	out := proxyTracingOf(t) // meshconfig_tracing_default.go
	out.Sampling = t.GetSampling()
	return &out
}
