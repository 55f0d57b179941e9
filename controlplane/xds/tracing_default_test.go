package xds

import (
	"slices"
	"strings"
	"testing"

	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"

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

// A waypoint's main_internal connection managers get the legacy block with its pod's tags
// and the 18 peer tags, and the request id extension; connect_terminate's gets neither
// (istiod builds it apart). enableTracing: false leaves the extension alone, and a
// Telemetry tracing that applies to the waypoint takes the block off (the departure).
func TestWaypointLegacyTracing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*model.Model)
		block  bool
	}{
		{name: "default", block: true},
		{name: "off", mutate: func(m *model.Model) { m.Mesh.Tracing.Off = true }},
		{name: "telemetry", mutate: func(m *model.Model) {
			m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{{Name: "mesh-default", Namespace: "istio-system",
				Spec: &telemetry.Telemetry{Tracing: []*telemetry.Tracing{{RandomSamplingPercentage: wrapperspb.Double(100)}}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := waypointModel(t)
			if tc.mutate != nil {
				tc.mutate(m)
			}
			res, err := GenerateWaypoint(m, shopWaypoint(t, m))
			if err != nil {
				t.Fatal(err)
			}
			hcms := listenerHCMs(t, res)
			var main int
			for name, h := range hcms {
				if !strings.HasPrefix(name, MainInternalListener+"/") {
					if h.GetTracing() != nil || h.GetRequestIdExtension() != nil {
						t.Errorf("%s: tracing %v, request id %v: istiod sets neither outside main_internal", name, h.GetTracing(), h.GetRequestIdExtension())
					}
					continue
				}
				main++
				var u uuidv3.UuidRequestIdConfig
				if err := h.GetRequestIdExtension().GetTypedConfig().UnmarshalTo(&u); err != nil || !u.GetUseRequestIdForTraceSampling().GetValue() {
					t.Errorf("%s: request_id_extension %v (%v), want UUID with use_request_id_for_trace_sampling", name, h.GetRequestIdExtension(), err)
				}
				tr := h.GetTracing()
				if !tc.block {
					if tr != nil {
						t.Errorf("%s: tracing %v, want none", name, tr)
					}
					continue
				}
				if tr == nil || tr.GetProvider() != nil || tr.GetRandomSampling().GetValue() != 1 {
					t.Fatalf("%s: tracing %v, want the legacy block at 1 %%", name, tr)
				}
				tags := map[string]*tracingv3.CustomTag{}
				for _, ct := range tr.GetCustomTags() {
					tags[ct.GetTag()] = ct
				}
				if len(tags) != 27 || tags["istio.canonical_service"].GetLiteral().GetValue() != "waypoint" ||
					tags["istio.namespace"].GetLiteral().GetValue() != "shop" ||
					tags["istio.source_workload"].GetValue() != "%FILTER_STATE(downstream_peer_obj:FIELD:workload)%" ||
					tags["istio.destination_app_version"].GetValue() != "%FILTER_STATE(upstream_peer_obj:FIELD:version)%" {
					t.Errorf("%s: %d tags %v, want Istio's nine of waypoint in shop and the 18 peer tags", name, len(tags), tr.GetCustomTags())
				}
			}
			if main < 2 {
				t.Fatalf("%d main_internal connection managers, want a service port's and direct-http", main)
			}
		})
	}
}

// A waypoint's proxy config is its pod's: the Gateway's infrastructure annotation
// proxy.istio.io/config with a tracing gives its main_internal block that sampling.
func TestWaypointProxyConfigTracing(t *testing.T) {
	t.Parallel()
	scenario := strings.Replace(waypointScenario, "  gatewayClassName: istio-waypoint\n",
		"  gatewayClassName: istio-waypoint\n  infrastructure:\n    annotations:\n      proxy.istio.io/config: \"tracing: {sampling: 50, maxPathTagLength: 7}\"\n", 1)
	if scenario == waypointScenario {
		t.Fatal("the waypoint scenario's Gateway changed: no place for the annotation")
	}
	m := buildWaypointModel(t, "waypoint.yaml", []byte(scenario))
	res, err := GenerateWaypoint(m, shopWaypoint(t, m))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, h := range listenerHCMs(t, res) {
		if !strings.HasPrefix(name, MainInternalListener+"/") {
			continue
		}
		n++
		if tr := h.GetTracing(); tr.GetRandomSampling().GetValue() != 50 || tr.GetMaxPathTagLength().GetValue() != 7 {
			t.Errorf("%s: tracing %v, want the annotation's 50 %% and path length 7", name, tr)
		}
	}
	if n == 0 {
		t.Fatal("no main_internal connection manager")
	}
}
