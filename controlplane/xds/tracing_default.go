package xds

import (
	"slices"
	"strings"
	"sync"

	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The legacy MeshConfig tracing, as istiod's configureTracingFromTelemetry sends it when
// no Telemetry tracing applies to a proxy: with enableTracing (Istio's default true)
// every HTTP connection manager gets a tracing block without a provider, 100 % client
// and overall sampling, random sampling from defaultConfig.tracing.sampling (else
// PILOT_TRACE_SAMPLING's 1 %; above 100, 1 %), Istio's custom tags (unless
// defaultConfig.tracing.enableIstioTags is false) with defaultConfig.tracing.customTags,
// and its maxPathTagLength. Envoy then takes the trace decision on every request (packed
// into x-request-id) and makes spans with the bootstrap's tracer, which pilot-agent
// writes from defaultConfig.tracing.zipkin.address (dataplane/agent's bootstrap); a
// proxy without one makes none. enableTracing: false sends no block.

// legacyTracing is the block of pod's HTTP connection managers without Telemetry
// tracing, nil under enableTracing: false. Its sampling, tags and path length are the
// pod's proxy config's (its proxy.istio.io/config tracing, else the mesh's
// defaultConfig.tracing: model.MeshTracing.For), as istiod's ProxyConfigOrDefault reads
// them from the node's metadata.
func legacyTracing(m *model.Model, pod *model.Pod) *hcm.HttpConnectionManager_Tracing {
	if m.Mesh.Tracing.Off {
		return nil
	}
	d := m.Mesh.Tracing.For(pod)
	out := &hcm.HttpConnectionManager_Tracing{}
	setSampling(out, proxySampling(d))
	out.CustomTags = tracingTags(pod, &tracingSpec{istioTags: !d.NoIstioTags}, d)
	if d.MaxPathTagLength != 0 {
		out.MaxPathTagLength = wrapperspb.UInt32(d.MaxPathTagLength)
	}
	return out
}

// proxySampling is istiod's proxyConfigSamplingValue of a proxy's config: its
// tracing.sampling when set, 1 % when above 100, else PILOT_TRACE_SAMPLING's default.
func proxySampling(d model.ProxyTracing) float64 {
	s := d.Sampling
	if s == 0 || s > 100 {
		return model.DefaultTraceSampling
	}
	return s
}

// setSampling is istiod's configureSampling: all clients and the overall rate at 100 %,
// the random rate at random percent.
func setSampling(t *hcm.HttpConnectionManager_Tracing, random float64) {
	t.ClientSampling = &typev3.Percent{Value: 100}
	t.OverallSampling = &typev3.Percent{Value: 100}
	t.RandomSampling = &typev3.Percent{Value: random}
}

// proxyConfigTags are defaultConfig.tracing.customTags as Envoy custom tags
// (istiod's buildCustomTagsFromProxyConfig), sorted by name.
func proxyConfigTags(d model.ProxyTracing) []*tracingv3.CustomTag {
	tags := make([]*tracingv3.CustomTag, 0, len(d.CustomTags))
	for name, ct := range d.CustomTags {
		t := &tracingv3.CustomTag{Tag: name}
		switch {
		case ct.Environment != "":
			t.Type = &tracingv3.CustomTag_Environment_{Environment: &tracingv3.CustomTag_Environment{Name: ct.Environment, DefaultValue: ct.Default}}
		case ct.Header != "":
			t.Type = &tracingv3.CustomTag_RequestHeader{RequestHeader: &tracingv3.CustomTag_Header{Name: ct.Header, DefaultValue: ct.Default}}
		default:
			t.Type = &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: ct.Literal}}
		}
		tags = append(tags, t)
	}
	slices.SortFunc(tags, func(a, b *tracingv3.CustomTag) int { return strings.Compare(a.GetTag(), b.GetTag()) })
	return tags
}

// uuidRequestIDAny is istiod's UUIDRequestIDExtension, on every HTTP connection manager
// it builds: Envoy's UUID x-request-id, whose trace decision (packed in the id) the
// next hops reuse (use_request_id_for_trace_sampling), so a request sampled at 1 % is
// sampled by every proxy it crosses. Built once: it never changes.
var uuidRequestIDAny = sync.OnceValue(func() *anypb.Any {
	a, err := anypb.New(&uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(true)})
	if err != nil {
		panic(err) // a constant message always marshals
	}
	return a
})

// uuidRequestID returns the request_id_extension of istiod's HTTP connection managers.
func uuidRequestID() *hcm.RequestIDExtension {
	return &hcm.RequestIDExtension{TypedConfig: uuidRequestIDAny()}
}

// waypointTracing is the tracing block of a waypoint's main_internal connection managers
// (istiod's buildWaypointInboundHTTPFilters builds them with buildHTTPConnectionManager,
// so configureTracing runs for them as for a sidecar's; its connect_terminate HCM is built
// apart and gets neither tracing nor a request id extension). Without Telemetry tracing
// it is the legacy MeshConfig block of the waypoint's pod, whose labels Istio's waypoint
// template sets (canonical name the Gateway's, revision "latest"), with the source and
// destination peer tags istiod's configureCustomTags adds for a waypoint; one block for
// all of them, the same for every chain. A Telemetry
// tracing that applies to the waypoint gives no block (a departure, docs/ARCHITECTURE.md:
// meshlab proxy refuses the peer tags' substitution formats under a provider).
func waypointTracing(m *model.Model, w *model.Waypoint) *hcm.HttpConnectionManager_Tracing {
	pod := &model.Pod{Name: w.Name, Namespace: w.Namespace, Labels: map[string]string{
		canonicalNameLabel: w.Name, canonicalRevisionLabel: "latest",
	}}
	// The proxy config is the waypoint pod's (its Gateway's proxy.istio.io/config
	// infrastructure annotation), else the mesh's.
	for _, p := range m.Pods {
		if p.Waypoint && m.WaypointOfPod(p) == w {
			pod.Sidecar.Tracing = p.Sidecar.Tracing
			break
		}
	}
	if tracingSpecFor(m, pod) != nil {
		return nil
	}
	tr := legacyTracing(m, pod)
	if tr == nil {
		return nil
	}
	tr.CustomTags = append(tr.CustomTags, waypointPeerTags()...)
	slices.SortStableFunc(tr.CustomTags, func(a, b *tracingv3.CustomTag) int { return strings.Compare(a.GetTag(), b.GetTag()) })
	return tr
}

// waypointPeerTags are istiod's buildWaypointSourceTags: the destination's and the
// source's workload fields from the peer metadata filters' filter state.
func waypointPeerTags() []*tracingv3.CustomTag {
	fields := []struct{ tag, field string }{
		{"workload", "workload"}, {"namespace", "namespace"}, {"cluster_id", "cluster"},
		{"canonical_service", "service"}, {"canonical_revision", "revision"}, {"app", "app"},
		{"app_version", "version"}, {"workload_type", "type"}, {"instance_name", "name"},
	}
	tags := make([]*tracingv3.CustomTag, 0, 2*len(fields))
	for _, side := range []struct{ prefix, obj string }{{"istio.destination_", "upstream_peer_obj"}, {"istio.source_", "downstream_peer_obj"}} {
		for _, f := range fields {
			tags = append(tags, &tracingv3.CustomTag{Tag: side.prefix + f.tag, Type: &tracingv3.CustomTag_Value{
				Value: "%FILTER_STATE(" + side.obj + ":FIELD:" + f.field + ")%",
			}})
		}
	}
	return tags
}
