package xds

import (
	"fmt"
	"net/url"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracecfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	resourcedetectors "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The opentelemetry tracing provider as istiod's otelConfig builds it (pilot/pkg/
// networking/core/tracing.go): envoy.tracers.opentelemetry with the proxy's service
// cluster as service_name; OTLP/gRPC to the collector service's outbound cluster
// (envoy_grpc, the collector's hostname as authority, grpc's timeout and
// initialMetadata), or with http OTLP/HTTP to <hostname><path> on that cluster (http's
// timeout and headers, overwritten); resourceDetectors.environment adds Envoy's
// environment resource detector.

const (
	otelTracer          = "envoy.tracers.opentelemetry"
	otelEnvDetectorName = "envoy.tracers.opentelemetry.resource_detectors.environment"
)

// otelTracingProvider is the HCM's tracing provider for p; found false when the
// collector's service does not exist (istiod then sends no tracing).
func otelTracingProvider(m *model.Model, pod *model.Pod, p model.OTelTracingProvider) (prov *tracecfg.Tracing_Http, found bool, err error) {
	hostname, cluster, found := lookupTracingCluster(m, p.Service, p.Port)
	if !found {
		return nil, false, nil
	}
	oc := &tracecfg.OpenTelemetryConfig{ServiceName: pod.ServiceCluster()}
	if h := p.HTTP; h != nil {
		uri, err := url.JoinPath(hostname, h.Path)
		if err != nil {
			return nil, false, fmt.Errorf("opentelemetry provider %s: otlp/http traces endpoint: %w", p.Name, err)
		}
		oc.HttpService = &core.HttpService{HttpUri: &core.HttpUri{Uri: uri, HttpUpstreamType: &core.HttpUri_Cluster{Cluster: cluster}}}
		if h.HasTimeout {
			oc.HttpService.HttpUri.Timeout = durationpb.New(h.Timeout)
		}
		for _, kv := range h.Headers {
			oc.HttpService.RequestHeadersToAdd = append(oc.HttpService.RequestHeadersToAdd, &core.HeaderValueOption{
				AppendAction: core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
				Header:       &core.HeaderValue{Key: kv[0], Value: kv[1]},
			})
		}
	} else {
		oc.GrpcService = &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{
			ClusterName: cluster, Authority: hostname,
		}}}
		if p.GRPCTimeout > 0 {
			oc.GrpcService.Timeout = durationpb.New(p.GRPCTimeout)
		}
		for _, kv := range p.GRPCMetadata {
			oc.GrpcService.InitialMetadata = append(oc.GrpcService.InitialMetadata, &core.HeaderValue{Key: kv[0], Value: kv[1]})
		}
	}
	if p.EnvironmentDetector {
		cfg, err := typed(&resourcedetectors.EnvironmentResourceDetectorConfig{})
		if err != nil {
			return nil, false, err
		}
		oc.ResourceDetectors = []*core.TypedExtensionConfig{{Name: otelEnvDetectorName, TypedConfig: cfg}}
	}
	cfg, err := typed(oc)
	if err != nil {
		return nil, false, err
	}
	return &tracecfg.Tracing_Http{Name: otelTracer, ConfigType: &tracecfg.Tracing_Http_TypedConfig{TypedConfig: cfg}}, true, nil
}
