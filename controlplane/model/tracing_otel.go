package model

import "time"

// OTelTracingProvider is an extension provider with an opentelemetry tracer: the
// collector its proxies export OTLP to, over gRPC (HTTP nil) or HTTP.
type OTelTracingProvider struct {
	Name    string
	Service string // the collector's host (a service's name, FQDN or short)
	Port    uint16
	// MaxTagLength bounds the http.url tag (0: Envoy's 256).
	MaxTagLength uint32
	// HTTP is the http exporter's settings; nil exports over gRPC.
	HTTP *OTelHTTP
	// GRPCTimeout (0: unset) and GRPCMetadata are grpc's timeout and initialMetadata.
	GRPCTimeout  time.Duration
	GRPCMetadata [][2]string
	// EnvironmentDetector is resourceDetectors.environment: the proxies add
	// OTEL_RESOURCE_ATTRIBUTES to their spans' resource.
	EnvironmentDetector bool
}

// OTelHTTP is an opentelemetry provider's http exporter: the path on the collector, the
// timeout of an export (HasTimeout false: unset) and headers (name, value) in order.
type OTelHTTP struct {
	Path       string
	Timeout    time.Duration
	HasTimeout bool
	Headers    [][2]string
}

// OTelProvider returns the opentelemetry provider named name.
func (t MeshTracing) OTelProvider(name string) (OTelTracingProvider, bool) {
	for _, p := range t.OTelProviders {
		if p.Name == name {
			return p, true
		}
	}
	return OTelTracingProvider{}, false
}
