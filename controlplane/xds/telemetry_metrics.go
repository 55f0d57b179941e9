package xds

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/types/known/durationpb"
	statsapi "istio.io/api/envoy/extensions/stats"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The Telemetry API's metrics, as istiod turns them into istio.stats configs
// (pilot/pkg/model/telemetry.go, mergeMetrics and generateStatsConfig): the Telemetries
// that apply to a proxy (the root namespace's namespace-wide one, then its own
// namespace's, then every one whose selector matches it) are merged in that order, later
// entries over earlier ones, per mode (CLIENT: outbound listeners; SERVER: inbound) and
// per metric; a tagOverride UPSERT becomes a dimension, REMOVE a tags_to_remove, disabled
// a drop, and ALL_METRICS disabled takes istio.stats off the mode's listeners. The
// lab's one metrics provider is prometheus (Istio's defaultProviders.metrics), which the
// loader holds every Telemetry to.

// metricsPlan is the istio.stats configs of one proxy, by mode.
type metricsPlan struct {
	client, server modeMetrics
	// reporting is reportingInterval (tcp_reporting_duration), nil for the default.
	reporting *durationpb.Duration
}

type modeMetrics struct {
	off     bool // ALL_METRICS disabled: no istio.stats
	metrics []*statsapi.MetricConfig
}

// telemetryMetricNames maps the Telemetry API's metrics to istio.stats' names
// (metricToPrometheusMetric).
var telemetryMetricNames = map[string]string{
	"REQUEST_COUNT":          "requests_total",
	"REQUEST_DURATION":       "request_duration_milliseconds",
	"REQUEST_SIZE":           "request_bytes",
	"RESPONSE_SIZE":          "response_bytes",
	"TCP_OPENED_CONNECTIONS": "tcp_connections_opened_total",
	"TCP_CLOSED_CONNECTIONS": "tcp_connections_closed_total",
	"TCP_SENT_BYTES":         "tcp_sent_bytes_total",
	"TCP_RECEIVED_BYTES":     "tcp_received_bytes_total",
	"GRPC_REQUEST_MESSAGES":  "request_messages_total",
	"GRPC_RESPONSE_MESSAGES": "response_messages_total",
}

// applicableTelemetries are the Telemetries that apply to pod, in istiod's merge order.
func applicableTelemetries(m *model.Model, pod *model.Pod) []*model.IstioConfig[*telemetry.Telemetry] {
	if pod == nil {
		return nil
	}
	root := m.Mesh.Root()
	var rootWide, nsWide *model.IstioConfig[*telemetry.Telemetry]
	var selected []*model.IstioConfig[*telemetry.Telemetry]
	// Telemetries are sorted by namespace and name: the first namespace-wide one of a
	// namespace is the one istiod takes (it takes the oldest).
	for _, t := range m.Istio.Telemetries {
		wide := len(t.Spec.GetSelector().GetMatchLabels()) == 0
		switch {
		case wide && t.Namespace == root && rootWide == nil:
			rootWide = t
		case wide && t.Namespace == pod.Namespace && pod.Namespace != root && nsWide == nil:
			nsWide = t
		case !wide && PolicySelects(t.Namespace, t.Spec.GetSelector(), root, pod):
			selected = append(selected, t)
		}
	}
	var out []*model.IstioConfig[*telemetry.Telemetry]
	for _, t := range []*model.IstioConfig[*telemetry.Telemetry]{rootWide, nsWide} {
		if t != nil {
			out = append(out, t)
		}
	}
	return append(out, selected...)
}

// metricsFor merges the metrics of the Telemetries that apply to pod.
func metricsFor(m *model.Model, pod *model.Pod) metricsPlan {
	return mergeMetrics(applicableTelemetries(m, pod))
}

// waypointTelemetries are the Telemetries that apply to waypoint w's chains of service
// svc (nil: its chains of no service), in istiod's merge order (applicableTelemetries
// for a waypoint proxy): the root namespace's namespace-wide one, the waypoint's
// namespace's, then, for a service of another namespace, that namespace's. A selector
// never selects a waypoint (istiod attaches only targetRefs to one, which the loader
// refuses).
func waypointTelemetries(m *model.Model, w *model.Waypoint, svc *model.Service) []*model.IstioConfig[*telemetry.Telemetry] {
	root := m.Mesh.Root()
	namespaces := []string{root}
	if w.Namespace != root {
		namespaces = append(namespaces, w.Namespace)
	}
	if svc != nil && svc.Namespace != w.Namespace {
		namespaces = append(namespaces, svc.Namespace)
	}
	var out []*model.IstioConfig[*telemetry.Telemetry]
	for _, ns := range namespaces {
		// Telemetries are sorted by namespace and name: the first namespace-wide one is
		// the one istiod takes (it takes the oldest).
		for _, t := range m.Istio.Telemetries {
			if t.Namespace == ns && len(t.Spec.GetSelector().GetMatchLabels()) == 0 {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// mergeMetrics merges the metrics of ts, later entries over earlier ones.
func mergeMetrics(ts []*model.IstioConfig[*telemetry.Telemetry]) metricsPlan {
	type override struct {
		disabled *bool
		tags     map[string]*telemetry.MetricsOverrides_TagOverride
	}
	modes := map[telemetry.WorkloadMode]map[string]*override{
		telemetry.WorkloadMode_CLIENT: {}, telemetry.WorkloadMode_SERVER: {},
	}
	allOff := map[telemetry.WorkloadMode]bool{}
	var plan metricsPlan
	for _, t := range ts {
		for _, ms := range t.Spec.GetMetrics() {
			if d := ms.GetReportingInterval(); d != nil {
				plan.reporting = d
			}
			for _, o := range ms.GetOverrides() {
				match := o.GetMatch()
				ms := modesOf(match.GetMode())
				if allMetrics(match) && o.GetDisabled().GetValue() {
					for _, md := range ms {
						allOff[md] = true
					}
					continue
				}
				for _, md := range ms {
					allOff[md] = false
					for _, name := range metricMatches(match) {
						ov := modes[md][name]
						if ov == nil {
							ov = &override{}
							modes[md][name] = ov
						}
						if o.GetDisabled() != nil {
							v := o.GetDisabled().GetValue()
							ov.disabled = &v
						}
						for k, v := range o.GetTagOverrides() {
							if ov.tags == nil {
								ov.tags = map[string]*telemetry.MetricsOverrides_TagOverride{}
							}
							ov.tags[k] = v
						}
					}
				}
			}
		}
	}
	build := func(md telemetry.WorkloadMode) modeMetrics {
		if allOff[md] {
			return modeMetrics{off: true}
		}
		var out modeMetrics
		names := make([]string, 0, len(modes[md]))
		for n := range modes[md] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ov := modes[md][n]
			mc := &statsapi.MetricConfig{Name: telemetryMetricNames[n], Dimensions: map[string]string{}, Drop: ov.disabled != nil && *ov.disabled}
			tags := make([]string, 0, len(ov.tags))
			for k := range ov.tags {
				tags = append(tags, k)
			}
			sort.Strings(tags)
			for _, k := range tags {
				if ov.tags[k].GetOperation() == telemetry.MetricsOverrides_TagOverride_REMOVE {
					mc.TagsToRemove = append(mc.TagsToRemove, k)
				} else {
					mc.Dimensions[k] = ov.tags[k].GetValue()
				}
			}
			out.metrics = append(out.metrics, mc)
		}
		return out
	}
	plan.client, plan.server = build(telemetry.WorkloadMode_CLIENT), build(telemetry.WorkloadMode_SERVER)
	return plan
}

// modesOf is the modes a selector's mode stands for (unset: both).
func modesOf(m telemetry.WorkloadMode) []telemetry.WorkloadMode {
	if m == telemetry.WorkloadMode_CLIENT || m == telemetry.WorkloadMode_SERVER {
		return []telemetry.WorkloadMode{m}
	}
	return []telemetry.WorkloadMode{telemetry.WorkloadMode_CLIENT, telemetry.WorkloadMode_SERVER}
}

// allMetrics reports whether a selector selects every metric (ALL_METRICS, or none
// given).
func allMetrics(s *telemetry.MetricSelector) bool {
	switch x := s.GetMetricMatch().(type) {
	case *telemetry.MetricSelector_Metric:
		return x.Metric == telemetry.MetricSelector_ALL_METRICS
	case *telemetry.MetricSelector_CustomMetric:
		return false
	}
	return true
}

// metricMatches is the metrics a selector names, by their Telemetry API names.
func metricMatches(s *telemetry.MetricSelector) []string {
	if x, ok := s.GetMetricMatch().(*telemetry.MetricSelector_Metric); ok && x.Metric != telemetry.MetricSelector_ALL_METRICS {
		return []string{x.Metric.String()}
	}
	names := make([]string, 0, len(telemetryMetricNames))
	for n := range telemetryMetricNames {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// forInbound returns the mode of a listener's direction.
func (p metricsPlan) forInbound(inbound bool) modeMetrics {
	if inbound {
		return p.server
	}
	return p.client
}
