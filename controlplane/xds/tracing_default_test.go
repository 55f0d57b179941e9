package xds

import (
	"slices"
	"testing"

	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Without any Telemetry tracing every HCM of a sidecar gets istiod's legacy MeshConfig
// block (no provider, defaultConfig.tracing's sampling, tags and path length) and the
// UUID request id extension, which enableTracing: false leaves alone.
func TestLegacyMeshTracing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		mutate   func(*model.MeshTracing)
		off      bool
		sampling float64
		tags     []string // tag names beside Istio's nine, or Istio's absent
		istio    bool
		maxPath  uint32
	}{
		{name: "default", sampling: 1, istio: true},
		{name: "sampling", mutate: func(t *model.MeshTracing) { t.Sampling = 42.5 }, sampling: 42.5, istio: true},
		{name: "sampling-above-100", mutate: func(t *model.MeshTracing) { t.Sampling = 150 }, sampling: 1, istio: true},
		{name: "off", mutate: func(t *model.MeshTracing) { t.Off = true }, off: true},
		{name: "proxy-config", mutate: func(t *model.MeshTracing) {
			t.Default = model.ProxyTracing{MaxPathTagLength: 99, NoIstioTags: true, CustomTags: map[string]model.ProxyTracingTag{
				"env": {Environment: "POD_NAME", Default: "x"}, "hdr": {Header: "x-user"}, "lit": {Literal: "v"},
			}}
		}, sampling: 1, tags: []string{"env", "hdr", "lit"}, maxPath: 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := helloModel()
			if tc.mutate != nil {
				tc.mutate(&m.Mesh.Tracing)
			}
			hcms := listenerHCMs(t, generate(t, m, "frontend-v1"))
			if len(hcms) == 0 {
				t.Fatal("no HCM generated")
			}
			for name, h := range hcms {
				var u uuidv3.UuidRequestIdConfig
				if err := h.GetRequestIdExtension().GetTypedConfig().UnmarshalTo(&u); err != nil || !u.GetUseRequestIdForTraceSampling().GetValue() {
					t.Errorf("%s: request_id_extension %v (%v), want UUID with use_request_id_for_trace_sampling", name, h.GetRequestIdExtension(), err)
				}
				tr := h.GetTracing()
				if tc.off {
					if tr != nil {
						t.Errorf("%s: enableTracing false: tracing %v, want none", name, tr)
					}
					continue
				}
				if tr == nil || tr.GetProvider() != nil || tr.GetClientSampling().GetValue() != 100 || tr.GetOverallSampling().GetValue() != 100 ||
					tr.GetRandomSampling().GetValue() != tc.sampling || tr.GetSpawnUpstreamSpan() != nil {
					t.Fatalf("%s: tracing %v, want no provider, client and overall 100, random %v", name, tr, tc.sampling)
				}
				if got := tr.GetMaxPathTagLength().GetValue(); got != tc.maxPath {
					t.Errorf("%s: max_path_tag_length %d, want %d", name, got, tc.maxPath)
				}
				var names []string
				for _, ct := range tr.GetCustomTags() {
					names = append(names, ct.GetTag())
				}
				if !slices.IsSorted(names) {
					t.Errorf("%s: tags %v not sorted by name", name, names)
				}
				want := len(tc.tags)
				if tc.istio {
					want += 9
				}
				if has := slices.Contains(names, "istio.canonical_service"); has != tc.istio || len(names) != want {
					t.Errorf("%s: tags %v, want Istio's nine: %v, and %v", name, names, tc.istio, tc.tags)
				}
				for _, ct := range tr.GetCustomTags() {
					switch ct.GetTag() {
					case "env":
						if e := ct.GetEnvironment(); e.GetName() != "POD_NAME" || e.GetDefaultValue() != "x" {
							t.Errorf("env tag %v", ct)
						}
					case "hdr":
						if _, ok := ct.GetType().(*tracingv3.CustomTag_RequestHeader); !ok || ct.GetRequestHeader().GetName() != "x-user" {
							t.Errorf("hdr tag %v", ct)
						}
					case "lit":
						if ct.GetLiteral().GetValue() != "v" {
							t.Errorf("lit tag %v", ct)
						}
					}
				}
			}
		})
	}
}
