package config

import (
	"fmt"

	telemetry "istio.io/api/telemetry/v1alpha1"
)

// A Telemetry's tracing, as the tracing pages use it: the providers it names (zipkin
// extension providers of the MeshConfig; which ones exist is checked where the
// generator looks them up, as istiod does, since the MeshConfig may come later),
// randomSamplingPercentage, disableSpanReporting and customTags (literal, header,
// environment). match (client or server side only), formatter tags,
// useRequestIdForTraceSampling false and disableContextPropagation are refused by name.

func telemetryTracingPaths() string {
	return "tracing " + expand("tracing", "providers randomSamplingPercentage disableSpanReporting customTags enableIstioTags") +
		" tracing.providers.name " +
		expand("tracing.customTags.*", "literal header environment") + " tracing.customTags.*.literal.value " +
		expand("tracing.customTags.*.header", "name defaultValue") + " " + expand("tracing.customTags.*.environment", "name defaultValue")
}

func validateTelemetryTracing(t *telemetry.Telemetry, p problems) {
	for i, tr := range t.GetTracing() {
		f := fmt.Sprintf("spec.tracing[%d]", i)
		if len(tr.GetProviders()) > 1 {
			p.addf(f+".providers", "names %d providers: Istio uses one tracing provider per workload, name one", len(tr.GetProviders()))
		}
		if v := tr.GetRandomSamplingPercentage(); v != nil && (v.GetValue() < 0 || v.GetValue() > 100) {
			p.addf(f+".randomSamplingPercentage", "%g is not a percentage (0-100)", v.GetValue())
		}
		for k, ct := range tr.GetCustomTags() {
			if ct.GetType() == nil {
				p.addf(f+".customTags["+k+"]", "needs literal, header or environment")
			}
		}
	}
}
