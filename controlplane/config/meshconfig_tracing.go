package config

import (
	"fmt"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// meshTracingPaths are the MeshConfig tracing fields a lab honours: enableTracing,
// defaultConfig.tracing.sampling (the percentage a Telemetry without
// randomSamplingPercentage falls back to) and extensionProviders with a zipkin or
// opentelemetry tracer (what a Telemetry's tracing names; meshconfig_tracing_otel.go).
// Other providers (skywalking, datadog, ...) are refused by the field walk, naming the
// field.
func meshTracingPaths() string {
	return "enableTracing defaultConfig defaultConfig.tracing defaultConfig.tracing.sampling " +
		"extensionProviders extensionProviders.name extensionProviders.zipkin " +
		expand("extensionProviders.zipkin", "service port maxTagLength path enable64bitTraceId") + " " +
		meshOTelTracingPaths() + " " +
		proxyTracingPaths() // meshconfig_tracing_default.go
}

// refusalAdvice is what to do instead of a refused field, by "Kind path", appended to
// refuseUnimplemented's message.
var refusalAdvice = map[string]string{
	"MeshConfig extensionProviders.opentelemetry.dynatraceSampler": ": meshlab's proxies have no OpenTelemetry samplers; " +
		"leave it out and sample with the Telemetry's randomSamplingPercentage (or defaultConfig.tracing.sampling)",
	"MeshConfig extensionProviders.opentelemetry.resourceDetectors.dynatrace": ": meshlab's proxies have the environment resource detector only " +
		"(resourceDetectors: {environment: {}}, which reads OTEL_RESOURCE_ATTRIBUTES)",
	"MeshConfig extensionProviders.opentelemetry.serviceAttributeEnrichment": ": meshlab's proxies name their spans' service.name after the proxy's " +
		"service cluster (<app>.<namespace>), istiod's default; leave it out",
	"MeshConfig extensionProviders.skywalking": ": meshlab's proxies have no SkyWalking tracer; " + zipkinInstead,
	"MeshConfig extensionProviders.datadog":    ": meshlab's proxies have no Datadog tracer; " + zipkinInstead,
	"MeshConfig extensionProviders.opencensus": ": meshlab's proxies have no OpenCensus tracer (Envoy removed it); " + zipkinInstead,
	"MeshConfig extensionProviders.lightstep":  ": meshlab's proxies have no Lightstep tracer (Istio deprecated it); " + zipkinInstead,
}

// zipkinInstead is the advice for a tracing provider the proxies lack.
const zipkinInstead = "name a zipkin provider (samples/addons/extras/zipkin.yaml, zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}) " +
	"or an opentelemetry one (samples/open-telemetry/otel.yaml's collector, opentelemetry: {service: opentelemetry-collector.observability.svc.cluster.local, port: 4317})"

// validateMeshTracing checks the tracing fields as Istio's mesh validation does:
// providers named once, with a service and a port.
func validateMeshTracing(mc *meshv1alpha1.MeshConfig, p problems) {
	validateProxyTracing(mc, p) // meshconfig_tracing_default.go
	if s := mc.GetDefaultConfig().GetTracing().GetSampling(); s < 0 || s > 100 {
		p.addf("spec.defaultConfig.tracing.sampling", "%g is not a percentage (0-100)", s)
	}
	seen := map[string]bool{}
	for i, ep := range mc.GetExtensionProviders() {
		f := fmt.Sprintf("spec.extensionProviders[%d]", i)
		if ep.GetName() == "" {
			p.addf(f+".name", "is required")
		} else if seen[ep.GetName()] {
			p.addf(f+".name", "%q names another provider too (names are unique)", ep.GetName())
		}
		seen[ep.GetName()] = true
		validateOTelTracing(ep, f, p)
		z := ep.GetZipkin()
		if z == nil {
			continue
		}
		if z.GetService() == "" {
			p.addf(f+".zipkin.service", "is required (the collector's service, e.g. zipkin.istio-system.svc.cluster.local)")
		}
		if msg := checkPort(int64(z.GetPort())); msg != "" {
			p.addf(f+".zipkin.port", "%s", msg)
		}
	}
}

// tracingModel fills mesh's tracing settings from a MeshConfig object.
func tracingModel(o *Object, mesh *model.MeshConfig) {
	mc := o.MeshConfig
	t := model.MeshTracing{Off: !mc.GetEnableTracing() && specHas(o.JSON, "enableTracing"), Sampling: mc.GetDefaultConfig().GetTracing().GetSampling()}
	for _, ep := range mc.GetExtensionProviders() {
		if z := ep.GetZipkin(); z != nil {
			t.Providers = append(t.Providers, model.ZipkinProvider{
				Name: ep.GetName(), Service: z.GetService(), Port: uint16(z.GetPort()),
				MaxTagLength: z.GetMaxTagLength(), Path: z.GetPath(), TraceID64: z.GetEnable_64BitTraceId(),
			})
		}
	}
	t.OTelProviders = otelTracingProviders(mc)
	t.Default = proxyTracingModel(mc) // meshconfig_tracing_default.go
	mesh.Tracing = t
}
