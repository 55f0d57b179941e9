package config

import (
	"fmt"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// meshOTelTracingPaths are the opentelemetry tracing provider's fields a lab honours:
// the collector (service, port), maxTagLength, OTLP over HTTP (path, timeout, headers
// with a value) or gRPC (timeout, initialMetadata with a value), and the environment
// resource detector. Samplers (dynatraceSampler), the dynatrace detector,
// serviceAttributeEnrichment and headers read from istiod's environment (envName) are
// refused by name.
func meshOTelTracingPaths() string {
	return "extensionProviders.opentelemetry " +
		expand("extensionProviders.opentelemetry", "service port maxTagLength http grpc resourceDetectors") + " " +
		expand("extensionProviders.opentelemetry.http", "path timeout headers") + " " +
		expand("extensionProviders.opentelemetry.http.headers", "name value") + " " +
		expand("extensionProviders.opentelemetry.grpc", "timeout initialMetadata") + " " +
		expand("extensionProviders.opentelemetry.grpc.initialMetadata", "name value") + " " +
		"extensionProviders.opentelemetry.resourceDetectors.environment"
}

// validateOTelTracing checks an opentelemetry provider as Istio's mesh validation does:
// a service and a port; headers named.
func validateOTelTracing(ep *meshv1alpha1.MeshConfig_ExtensionProvider, f string, p problems) {
	o := ep.GetOpentelemetry()
	if o == nil {
		return
	}
	f += ".opentelemetry"
	if o.GetService() == "" {
		p.addf(f+".service", "is required (the collector's service, e.g. opentelemetry-collector.observability.svc.cluster.local)")
	}
	if msg := checkPort(int64(o.GetPort())); msg != "" {
		p.addf(f+".port", "%s", msg)
	}
	for i, h := range o.GetHttp().GetHeaders() {
		if h.GetName() == "" {
			p.addf(fmt.Sprintf("%s.http.headers[%d].name", f, i), "is required")
		}
	}
	for i, h := range o.GetGrpc().GetInitialMetadata() {
		if h.GetName() == "" {
			p.addf(fmt.Sprintf("%s.grpc.initialMetadata[%d].name", f, i), "is required")
		}
	}
}

// otelTracingProviders are mc's extension providers with an opentelemetry tracer.
func otelTracingProviders(mc *meshv1alpha1.MeshConfig) []model.OTelTracingProvider {
	var out []model.OTelTracingProvider
	for _, ep := range mc.GetExtensionProviders() {
		o := ep.GetOpentelemetry()
		if o == nil {
			continue
		}
		p := model.OTelTracingProvider{
			Name: ep.GetName(), Service: o.GetService(), Port: uint16(o.GetPort()), //nolint:gosec // checkPort bounds it
			MaxTagLength:        o.GetMaxTagLength(),
			EnvironmentDetector: o.GetResourceDetectors().GetEnvironment() != nil,
		}
		if h := o.GetHttp(); h != nil {
			p.HTTP = &model.OTelHTTP{Path: h.GetPath(), Timeout: h.GetTimeout().AsDuration(), HasTimeout: h.GetTimeout() != nil}
			for _, hd := range h.GetHeaders() {
				p.HTTP.Headers = append(p.HTTP.Headers, [2]string{hd.GetName(), hd.GetValue()})
			}
		} else if g := o.GetGrpc(); g != nil {
			p.GRPCTimeout = g.GetTimeout().AsDuration()
			for _, hd := range g.GetInitialMetadata() {
				p.GRPCMetadata = append(p.GRPCMetadata, [2]string{hd.GetName(), hd.GetValue()})
			}
		}
		out = append(out, p)
	}
	return out
}
