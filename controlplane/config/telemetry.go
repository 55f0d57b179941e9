package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Telemetry (telemetry.istio.io v1alpha1 and v1, one schema) is read for its access
// logging, the Access Logs task's use: the built-in provider envoy (Istio's default
// MeshConfig has it: /dev/stdout in the mesh's format) turned on or disabled for the
// workloads a Telemetry selects (the root namespace's for the mesh, a namespace's for its
// pods, a selector's for the pods it matches; the most specific wins, as istiod merges
// them); and for its metrics, the customize-metrics and telemetry-api pages' use: the
// prometheus provider's overrides (tags removed or set from CEL expressions, metrics
// disabled, per client and server mode), merged as istiod merges them into istio.stats
// (controlplane/xds/telemetry_metrics.go); and for its tracing (telemetry_tracing.go).
// A tagOverride's value is not checked here, as
// istiod does not: istio-proxy drops a standard tag whose expression does not parse. What
// would change behaviour and is not built is refused by name: targetRefs, log
// filters and client/server matches, custom metrics, providers the lab has not.

func telemetryPaths() string {
	return strings.Join([]string{
		"selector selector.matchLabels accessLogging metrics",
		expand("accessLogging", "providers disabled"),
		expand("accessLogging.providers", "name"),
		expand("metrics", "providers overrides reportingInterval"),
		expand("metrics.providers", "name"),
		expand("metrics.overrides", "match disabled tagOverrides"),
		expand("metrics.overrides.match", "metric mode"),
		expand("metrics.overrides.tagOverrides.*", "operation value"),
		telemetryTracingPaths(), // telemetry_tracing.go
	}, " ")
}

// TelemetryMetricsProvider is the one metrics provider a lab has: Istio's default
// prometheus (the proxies' istio.stats, scraped from their merged metrics).
const TelemetryMetricsProvider = "prometheus"

var telemetryFields = lazyFields(telemetryPaths)

// TelemetryAccessLogProvider is Istio's built-in access log provider "envoy"
// (envoyFileAccessLog to /dev/stdout, formatted as the mesh's accessLogFormat); the mesh
// config's envoyOtelAls providers are the others. A name neither is taken, as istiod
// takes it, and logs nothing (istiod skips a provider it cannot find).
const TelemetryAccessLogProvider = "envoy"

// validateTelemetry checks a Telemetry on its own.
func validateTelemetry(t *telemetry.Telemetry, p problems) {
	refuseUnimplemented(t.ProtoReflect(), telemetryFields(), "Telemetry", p)
	checkSelector(t.GetSelector(), "spec.selector", p)
	for i, ms := range t.GetMetrics() {
		for j, pr := range ms.GetProviders() {
			if n := pr.GetName(); n != TelemetryMetricsProvider {
				p.addf(fmt.Sprintf("spec.metrics[%d].providers[%d].name", i, j), "%q is not a metrics provider of the lab (it has %q, Istio's default: the proxies' istio.stats)", n, TelemetryMetricsProvider)
			}
		}
		for j, o := range ms.GetOverrides() {
			for _, k := range slices.Sorted(maps.Keys(o.GetTagOverrides())) {
				at := fmt.Sprintf("spec.metrics[%d].overrides[%d].tagOverrides[%s]", i, j, k)
				to := o.GetTagOverrides()[k]
				switch {
				case k == "":
					p.addf(at, "a tag name may not be empty")
				case to.GetOperation() == telemetry.MetricsOverrides_TagOverride_UPSERT && to.GetValue() == "":
					p.addf(at+".value", "must be set when operation is UPSERT")
				case to.GetOperation() == telemetry.MetricsOverrides_TagOverride_REMOVE && to.GetValue() != "":
					p.addf(at+".value", "may only be set when operation is UPSERT")
				}
			}
		}
	}
	validateTelemetryTracing(t, p) // telemetry_tracing.go
	for i, al := range t.GetAccessLogging() {
		for j, pr := range al.GetProviders() {
			if pr.GetName() == "" {
				p.addf(fmt.Sprintf("spec.accessLogging[%d].providers[%d].name", i, j), "may not be empty")
			}
		}
	}
}

// telemetryModel is the model form of a Telemetry: the spec with an empty selector made
// nil (it selects the whole namespace, as no selector).
func telemetryModel(o *Object) *model.IstioConfig[*telemetry.Telemetry] {
	t := proto.Clone(o.Telemetry).(*telemetry.Telemetry)
	if len(t.GetSelector().GetMatchLabels()) == 0 {
		t.Selector = nil
	}
	return &model.IstioConfig[*telemetry.Telemetry]{Name: o.Origin.Name, Namespace: o.Origin.Namespace, Spec: t, Origin: o.Origin}
}
