package xds

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	statsapi "istio.io/api/envoy/extensions/stats"
	telemetry "istio.io/api/telemetry/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

func telemetryOf(ns, name string, spec *telemetry.Telemetry) *model.IstioConfig[*telemetry.Telemetry] {
	return &model.IstioConfig[*telemetry.Telemetry]{Name: name, Namespace: ns, Spec: spec}
}

func upsert(v string) *telemetry.MetricsOverrides_TagOverride {
	return &telemetry.MetricsOverrides_TagOverride{Value: v}
}

func selectMetric(m telemetry.MetricSelector_IstioMetric, mode telemetry.WorkloadMode) *telemetry.MetricSelector {
	return &telemetry.MetricSelector{MetricMatch: &telemetry.MetricSelector_Metric{Metric: m}, Mode: mode}
}

func planJSON(t *testing.T, mm modeMetrics) string {
	t.Helper()
	if mm.off {
		return "off"
	}
	b, err := protojson.Marshal(&statsapi.PluginConfig{Metrics: mm.metrics})
	if err != nil {
		t.Fatal(err)
	}
	// protojson's spacing is unstable by design: compare without it (no value here
	// holds a space).
	out := b[:0:0]
	for _, c := range b {
		if c != ' ' && c != '\n' {
			out = append(out, c)
		}
	}
	return string(out)
}

// The Telemetry API's metrics merge as istiod's mergeMetrics: the customize-metrics
// page's namespace-wide tagOverrides (both modes), the telemetry-api page's REMOVE in the
// root namespace, a workload's selector-matched override after its namespace's, per
// mode; ALL_METRICS disabled turns a mode off and a later override of the mode turns it
// back on; reportingInterval becomes tcp_reporting_duration.
func TestMetricsFor(t *testing.T) {
	t.Parallel()
	pod := &model.Pod{Name: "productpage-v1-1", Namespace: "default", Labels: map[string]string{"app": "productpage"}}
	m := &model.Model{}
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{
		telemetryOf("default", "namespace-metrics", &telemetry.Telemetry{Metrics: []*telemetry.Metrics{{
			Providers: []*telemetry.ProviderRef{{Name: "prometheus"}},
			Overrides: []*telemetry.MetricsOverrides{{
				Match: selectMetric(telemetry.MetricSelector_REQUEST_COUNT, telemetry.WorkloadMode_CLIENT_AND_SERVER),
				TagOverrides: map[string]*telemetry.MetricsOverrides_TagOverride{
					"destination_port": upsert("string(destination.port)"), "request_host": upsert("request.host"),
				},
			}},
		}}}),
		telemetryOf("default", "pp", &telemetry.Telemetry{
			Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "productpage"}},
			Metrics: []*telemetry.Metrics{{Overrides: []*telemetry.MetricsOverrides{{
				Match:    selectMetric(telemetry.MetricSelector_REQUEST_COUNT, telemetry.WorkloadMode_SERVER),
				Disabled: wrapperspb.Bool(true),
			}}}},
		}),
		telemetryOf("istio-system", "remove-tags", &telemetry.Telemetry{Metrics: []*telemetry.Metrics{{
			Providers: []*telemetry.ProviderRef{{Name: "prometheus"}},
			Overrides: []*telemetry.MetricsOverrides{{
				Match: selectMetric(telemetry.MetricSelector_REQUEST_COUNT, telemetry.WorkloadMode_CLIENT_AND_SERVER),
				TagOverrides: map[string]*telemetry.MetricsOverrides_TagOverride{
					"grpc_response_status": {Operation: telemetry.MetricsOverrides_TagOverride_REMOVE},
				},
			}},
			ReportingInterval: nil,
		}}}),
	}
	if got := applicableTelemetries(m, pod); len(got) != 3 || got[0].Name != "remove-tags" || got[1].Name != "namespace-metrics" || got[2].Name != "pp" {
		t.Fatalf("applicableTelemetries order: %v", got)
	}
	plan := metricsFor(m, pod)
	wantClient := `{"metrics":[{"dimensions":{"destination_port":"string(destination.port)","request_host":"request.host"},"name":"requests_total","tagsToRemove":["grpc_response_status"]}]}`
	wantServer := `{"metrics":[{"dimensions":{"destination_port":"string(destination.port)","request_host":"request.host"},"name":"requests_total","tagsToRemove":["grpc_response_status"],"drop":true}]}`
	if got := planJSON(t, plan.client); got != wantClient {
		t.Errorf("client:\n got %s\nwant %s", got, wantClient)
	}
	if got := planJSON(t, plan.server); got != wantServer {
		t.Errorf("server:\n got %s\nwant %s", got, wantServer)
	}
	// Another namespace's pod sees the root namespace's only.
	if got := planJSON(t, metricsFor(m, &model.Pod{Namespace: "foo"}).server); got != `{"metrics":[{"name":"requests_total","tagsToRemove":["grpc_response_status"]}]}` {
		t.Errorf("foo's server: %s", got)
	}

	off := &model.Model{}
	off.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{
		telemetryOf("istio-system", "remove-all-metrics", &telemetry.Telemetry{Metrics: []*telemetry.Metrics{{
			Providers: []*telemetry.ProviderRef{{Name: "prometheus"}},
			Overrides: []*telemetry.MetricsOverrides{{
				Match:    selectMetric(telemetry.MetricSelector_ALL_METRICS, telemetry.WorkloadMode_CLIENT_AND_SERVER),
				Disabled: wrapperspb.Bool(true),
			}},
		}}}),
		telemetryOf("default", "back-on", &telemetry.Telemetry{
			Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "productpage"}},
			Metrics: []*telemetry.Metrics{{Overrides: []*telemetry.MetricsOverrides{{
				Match:        selectMetric(telemetry.MetricSelector_REQUEST_SIZE, telemetry.WorkloadMode_CLIENT),
				TagOverrides: map[string]*telemetry.MetricsOverrides_TagOverride{"x": upsert("'y'")},
			}}}},
		}),
	}
	plan = metricsFor(off, pod)
	if !plan.server.off || plan.client.off {
		t.Errorf("ALL_METRICS disabled then a CLIENT override: server off %v (want true), client off %v (want false)", plan.server.off, plan.client.off)
	}
	if plan = metricsFor(off, &model.Pod{Namespace: "default"}); !plan.server.off || !plan.client.off {
		t.Errorf("ALL_METRICS disabled: %+v", plan)
	}
}

// A generated sidecar carries the plan: no istio.stats where a mode's metrics are off,
// the dimensions in istio.stats where they are set.
func TestTelemetryMetricsInListeners(t *testing.T) {
	t.Parallel()
	m := helloModel()
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{
		telemetryOf("default", "namespace-metrics", &telemetry.Telemetry{Metrics: []*telemetry.Metrics{{
			Providers: []*telemetry.ProviderRef{{Name: "prometheus"}},
			Overrides: []*telemetry.MetricsOverrides{
				{Match: selectMetric(telemetry.MetricSelector_ALL_METRICS, telemetry.WorkloadMode_CLIENT), Disabled: wrapperspb.Bool(true)},
				{
					Match:        selectMetric(telemetry.MetricSelector_REQUEST_COUNT, telemetry.WorkloadMode_SERVER),
					TagOverrides: map[string]*telemetry.MetricsOverrides_TagOverride{"request_host": upsert("request.host")},
				},
			},
		}}}),
	}
	res := generate(t, m, "backend-v1")
	if got := httpFilterNames(t, res, "0.0.0.0_8080"); slices.Contains(got, StatsFilter) {
		t.Errorf("outbound HTTP filters with CLIENT metrics off: %q", got)
	}
	vi := findListener(t, res, VirtualInboundListener)
	found := false
	for _, fc := range vi.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() != StatsFilter {
				continue
			}
			var pc statsapi.PluginConfig
			if err := f.GetTypedConfig().UnmarshalTo(&pc); err != nil {
				t.Fatal(err)
			}
			if len(pc.GetMetrics()) != 1 || pc.GetMetrics()[0].GetDimensions()["request_host"] != "request.host" {
				t.Errorf("inbound chain %s istio.stats: %v", fc.GetName(), &pc)
			}
			found = true
		}
	}
	if !found {
		t.Error("no istio.stats on virtualInbound's TCP chains")
	}
}
