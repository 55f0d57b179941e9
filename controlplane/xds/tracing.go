package xds

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tracecfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Tracing as istiod configures it from the Telemetry API (pilot/pkg/networking/core/
// tracing.go, configureTracingFromTelemetry): the Telemetry tracing that applies to a
// pod (the root namespace's, then its namespace's, then one selecting it, each
// overriding the fields it sets) names a provider of the MeshConfig's
// extensionProviders; every HTTP connection manager of the pod's proxy then gets a
// tracing block with that provider (envoy.tracers.zipkin to the collector service's
// outbound cluster, Zipkin v2 JSON, 128-bit trace ids, no shared span context), 100 %
// client and overall sampling, the Telemetry's randomSamplingPercentage (else
// defaultConfig.tracing.sampling, else istiod's 1 %), Istio's custom tags and, on a
// gateway, spawn_upstream_span. A provider name the mesh config lacks gives the block
// without provider (istiod's "provider lookup failed"); a collector service that does
// not exist gives no block, as istiod's cluster lookup failure; disableSpanReporting
// gives none. An opentelemetry provider gives envoy.tracers.opentelemetry
// (tracing_otel.go). Without any Telemetry tracing istiod sends the legacy MeshConfig
// block (tracing_default.go).

const (
	zipkinTracer         = "envoy.tracers.zipkin"
	zipkinDefaultPath    = "/api/v2/spans"
	zipkinReportTimeout  = 5 * time.Second
	rbacShadowAllow      = "istio_dry_run_allow_"
	rbacShadowDeny       = "istio_dry_run_deny_"
	rbacShadowPolicyID   = "shadow_effective_policy_id"
	rbacShadowResult     = "shadow_engine_result"
	tracingMeshID        = "cluster.local" // the agent's MESH_ID
	tracingDefaultTagLen = 0
)

// tracingSpec is the Telemetry tracing that applies to a pod, merged.
type tracingSpec struct {
	provider   string
	sampling   *float64
	disabled   bool
	customTags map[string]*telemetry.Tracing_CustomTag
	istioTags  bool
}

// tracingSpecFor merges the Telemetry tracing that applies to pod; nil when none does.
func tracingSpecFor(m *model.Model, pod *model.Pod) *tracingSpec {
	root := m.Mesh.Root()
	rank := func(t *model.IstioConfig[*telemetry.Telemetry]) int {
		switch {
		case len(t.Spec.GetSelector().GetMatchLabels()) > 0:
			return 3
		case t.Namespace == pod.Namespace:
			return 2
		}
		return 1
	}
	var applies []*model.IstioConfig[*telemetry.Telemetry]
	for _, t := range m.Istio.Telemetries {
		if len(t.Spec.GetTracing()) > 0 && PolicySelects(t.Namespace, t.Spec.GetSelector(), root, pod) {
			applies = append(applies, t)
		}
	}
	if len(applies) == 0 {
		return nil
	}
	slices.SortStableFunc(applies, func(a, b *model.IstioConfig[*telemetry.Telemetry]) int { return cmp.Compare(rank(a), rank(b)) })
	spec := &tracingSpec{istioTags: true}
	for _, t := range applies {
		tr := t.Spec.GetTracing()[0]
		if ps := tr.GetProviders(); len(ps) > 0 {
			spec.provider = ps[0].GetName()
		}
		if v := tr.GetRandomSamplingPercentage(); v != nil {
			s := v.GetValue()
			spec.sampling = &s
		}
		if v := tr.GetDisableSpanReporting(); v != nil {
			spec.disabled = v.GetValue()
		}
		if len(tr.GetCustomTags()) > 0 {
			spec.customTags = tr.GetCustomTags()
		}
		if v := tr.GetEnableIstioTags(); v != nil {
			spec.istioTags = v.GetValue()
		}
	}
	return spec
}

// tracingFor returns the tracing block of pod's HTTP connection managers, nil for none.
func tracingFor(m *model.Model, pod *model.Pod, router bool) (*hcm.HttpConnectionManager_Tracing, error) {
	spec := tracingSpecFor(m, pod)
	if spec == nil {
		return legacyTracing(m, pod), nil // tracing_default.go
	}
	if spec.disabled {
		return nil, nil
	}
	out := &hcm.HttpConnectionManager_Tracing{}
	if p, ok := m.Mesh.Tracing.Provider(spec.provider); ok {
		hostname, cluster, found := lookupTracingCluster(m, p.Service, p.Port)
		if !found {
			return nil, nil // istiod: "could not find cluster for tracing provider"
		}
		path := cmp.Or(p.Path, zipkinDefaultPath)
		zc := &tracecfg.ZipkinConfig{
			CollectorEndpointVersion: tracecfg.ZipkinConfig_HTTP_JSON,
			TraceId_128Bit:           !p.TraceID64,
			SharedSpanContext:        wrapperspb.Bool(false),
			CollectorService: &core.HttpService{HttpUri: &core.HttpUri{
				Uri:              "http://" + hostname + path,
				HttpUpstreamType: &core.HttpUri_Cluster{Cluster: cluster},
				Timeout:          durationpb.New(zipkinReportTimeout),
			}},
		}
		cfg, err := typed(zc)
		if err != nil {
			return nil, err
		}
		out.Provider = &tracecfg.Tracing_Http{Name: zipkinTracer, ConfigType: &tracecfg.Tracing_Http_TypedConfig{TypedConfig: cfg}}
		if router {
			out.SpawnUpstreamSpan = wrapperspb.Bool(true)
		}
		if p.MaxTagLength != tracingDefaultTagLen {
			out.MaxPathTagLength = wrapperspb.UInt32(p.MaxTagLength)
		}
	} else if p, ok := m.Mesh.Tracing.OTelProvider(spec.provider); ok {
		prov, found, err := otelTracingProvider(m, pod, p) // tracing_otel.go
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, nil // istiod: "could not find cluster for tracing provider"
		}
		out.Provider = prov
		if router {
			out.SpawnUpstreamSpan = wrapperspb.Bool(true)
		}
		if p.MaxTagLength != tracingDefaultTagLen {
			out.MaxPathTagLength = wrapperspb.UInt32(p.MaxTagLength)
		}
	}
	pc := m.Mesh.Tracing.For(pod) // the proxy's config: tracing_default.go
	sampling := proxySampling(pc)
	if spec.sampling != nil {
		sampling = *spec.sampling
	}
	setSampling(out, sampling)
	out.CustomTags = tracingTags(pod, spec, pc)
	// istiod falls back to defaultConfig.tracing.maxPathTagLength when the provider
	// sets none.
	if out.MaxPathTagLength == nil && pc.MaxPathTagLength != 0 {
		out.MaxPathTagLength = wrapperspb.UInt32(pc.MaxPathTagLength)
	}
	return out, nil
}

// lookupTracingCluster is istiod's LookupCluster: the service named by its hostname
// (or namespace/hostname) and its outbound cluster on port.
func lookupTracingCluster(m *model.Model, service string, port uint16) (hostname, cluster string, ok bool) {
	ns, name, qualified := strings.Cut(service, "/")
	if !qualified {
		name, ns = service, ""
	}
	var found *model.Service
	for _, s := range m.Services {
		if s.Hostname() != name || (ns != "" && s.Namespace != ns) {
			continue
		}
		if found != nil {
			return "", "", false // in several namespaces: istiod wants namespace/hostname
		}
		found = s
	}
	if found == nil {
		return "", "", false
	}
	return found.Hostname(), OutboundClusterName(port, "", found.Hostname()), true
}

// tracingTags are istiod's custom tags, sorted by name: the workload's canonical
// service and revision, mesh, namespace and cluster (literals), the authorization
// dry-run results (request metadata of the RBAC filter), and the Telemetry's own, or
// without any defaultConfig.tracing's customTags (istiod's configureCustomTags).
func tracingTags(pod *model.Pod, spec *tracingSpec, proxy model.ProxyTracing) []*tracingv3.CustomTag {
	var tags []*tracingv3.CustomTag
	literal := func(name, v string) *tracingv3.CustomTag {
		return &tracingv3.CustomTag{Tag: name, Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: v}}}
	}
	if spec.istioTags {
		svc, rev := CanonicalService(pod.Labels, cmp.Or(pod.Workload, pod.Name))
		tags = append(tags,
			literal("istio.canonical_revision", rev), literal("istio.canonical_service", svc),
			literal("istio.mesh_id", tracingMeshID), literal("istio.namespace", cmp.Or(pod.Namespace, "default")),
			literal("istio.cluster_id", DefaultClusterID))
		for _, d := range []struct{ tag, prefix, key string }{
			{"istio.authorization.dry_run.allow_policy.name", rbacShadowAllow, rbacShadowPolicyID},
			{"istio.authorization.dry_run.allow_policy.result", rbacShadowAllow, rbacShadowResult},
			{"istio.authorization.dry_run.deny_policy.name", rbacShadowDeny, rbacShadowPolicyID},
			{"istio.authorization.dry_run.deny_policy.result", rbacShadowDeny, rbacShadowResult},
		} {
			tags = append(tags, &tracingv3.CustomTag{Tag: d.tag, Type: &tracingv3.CustomTag_Metadata_{Metadata: &tracingv3.CustomTag_Metadata{
				Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Request_{Request: &metadatav3.MetadataKind_Request{}}},
				MetadataKey: &metadatav3.MetadataKey{Key: wellknown.HTTPRoleBasedAccessControl, Path: []*metadatav3.MetadataKey_PathSegment{
					{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: d.prefix + d.key}},
				}},
			}}})
		}
	}
	if len(spec.customTags) == 0 {
		tags = append(tags, proxyConfigTags(proxy)...) // tracing_default.go
	}
	for name, ct := range spec.customTags {
		t := &tracingv3.CustomTag{Tag: name}
		switch v := ct.GetType().(type) {
		case *telemetry.Tracing_CustomTag_Literal:
			t.Type = &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: v.Literal.GetValue()}}
		case *telemetry.Tracing_CustomTag_Header:
			t.Type = &tracingv3.CustomTag_RequestHeader{RequestHeader: &tracingv3.CustomTag_Header{Name: v.Header.GetName(), DefaultValue: v.Header.GetDefaultValue()}}
		case *telemetry.Tracing_CustomTag_Environment:
			t.Type = &tracingv3.CustomTag_Environment_{Environment: &tracingv3.CustomTag_Environment{Name: v.Environment.GetName(), DefaultValue: v.Environment.GetDefaultValue()}}
		default:
			continue // refused by the loader
		}
		tags = append(tags, t)
	}
	slices.SortFunc(tags, func(a, b *tracingv3.CustomTag) int { return strings.Compare(a.GetTag(), b.GetTag()) })
	return tags
}

// addPodTracing adds the tracing block of pod (a gateway's when router) to the
// listeners' HTTP connection managers.
func addPodTracing(ls []types.Resource, m *model.Model, pod *model.Pod, router bool) error {
	tr, err := tracingFor(m, pod, router)
	if err != nil {
		return err
	}
	return addTracing(ls, tr)
}

// addTracing sets tr as the tracing block of every HTTP connection manager of the
// listeners, and Envoy's UUID request id extension with
// use_request_id_for_trace_sampling, as istiod's buildHTTPConnectionManager does for
// each it builds (with or without tracing).
func addTracing(ls []types.Resource, tr *hcm.HttpConnectionManager_Tracing) error {
	for _, r := range ls {
		l, ok := r.(*listener.Listener)
		if !ok {
			continue
		}
		chains := l.GetFilterChains()
		if l.GetDefaultFilterChain() != nil {
			chains = append(chains[:len(chains):len(chains)], l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				if f.GetName() != wellknown.HTTPConnectionManager {
					continue
				}
				h := &hcm.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
					return fmt.Errorf("unpack %s of listener %s: %w", f.GetName(), l.GetName(), err)
				}
				h.Tracing = tr
				h.RequestIdExtension = uuidRequestID()
				cfg, err := typed(h)
				if err != nil {
					return err
				}
				f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: cfg}
			}
		}
	}
	return nil
}
