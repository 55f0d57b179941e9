package xds

import (
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	statsapi "istio.io/api/envoy/extensions/stats"
	networking "istio.io/api/networking/v1alpha3"
	telemetry "istio.io/api/telemetry/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// gatewayStats returns the istio.stats configs and whether the peer_metadata filter
// leads, of every chain of the gateway's listeners, by listener name.
func gatewayStats(t *testing.T, m *model.Model) (map[string][]*statsapi.PluginConfig, map[string]bool) {
	t.Helper()
	stats, mx := map[string][]*statsapi.PluginConfig{}, map[string]bool{}
	for _, r := range generateGateway(t, m, ingressPod)[resource.ListenerType] {
		l := r.(*listener.Listener)
		for _, fc := range l.GetFilterChains() {
			last := lastFilter(fc)
			var st *statsapi.PluginConfig
			switch last.GetName() {
			case wellknown.TCPProxy:
				fs := fc.GetFilters()
				if len(fs) > 1 && fs[len(fs)-2].GetName() == StatsFilter {
					st = &statsapi.PluginConfig{}
					if err := fs[len(fs)-2].GetTypedConfig().UnmarshalTo(st); err != nil {
						t.Fatal(err)
					}
				}
			case wellknown.HTTPConnectionManager:
				hs := hcmFilters(t, last)
				mx[l.GetName()] = len(hs) > 0 && hs[0].GetName() == MetadataExchangeFilter
				if len(hs) > 1 && hs[len(hs)-2].GetName() == StatsFilter {
					st = &statsapi.PluginConfig{}
					if err := hs[len(hs)-2].GetTypedConfig().UnmarshalTo(st); err != nil {
						t.Fatal(err)
					}
				}
			}
			stats[l.GetName()] = append(stats[l.GetName()], st)
		}
	}
	return stats, mx
}

// TestGatewayStatsFollowTelemetry holds a gateway's telemetry filters to istiod's for
// the gateway listener class: peer_metadata (outbound) first in every HCM, istio.stats
// before the router and before tcp_proxy, the client mode's metrics of the Telemetries
// that apply to the gateway pod (root namespace, its namespace, a selector matching its
// labels), no reporter (the listener's outbound direction: "source"), the Host header
// never the service. ALL_METRICS disabled for clients takes them off. Before, a gateway
// had neither filter.
func TestGatewayStatsFollowTelemetry(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("mixed",
		httpServer(80, "*"),
		&networking.Server{Port: &networking.Port{Number: 31400, Name: "tcp", Protocol: "TCP"}, Hosts: []string{"*"}},
	)}, vs("db", &networking.VirtualService{
		Hosts: []string{"*"}, Gateways: []string{"mixed"},
		Tcp: []*networking.TCPRoute{{
			Match: []*networking.L4MatchAttributes{{Port: 31400}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "db.default.svc.cluster.local", Port: &networking.PortSelector{Number: 5432}}}},
		}},
	}))
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{
		telemetryOf("istio-system", "mesh-default", &telemetry.Telemetry{Metrics: []*telemetry.Metrics{{
			Providers: []*telemetry.ProviderRef{{Name: "prometheus"}},
			Overrides: []*telemetry.MetricsOverrides{{
				Match:        selectMetric(telemetry.MetricSelector_REQUEST_COUNT, telemetry.WorkloadMode_CLIENT_AND_SERVER),
				TagOverrides: map[string]*telemetry.MetricsOverrides_TagOverride{"request_host": upsert("request.host")},
			}, {
				Match:    selectMetric(telemetry.MetricSelector_REQUEST_SIZE, telemetry.WorkloadMode_SERVER),
				Disabled: wrapperspb.Bool(true),
			}},
		}}}),
		telemetryOf("default", "not-the-gateways", &telemetry.Telemetry{Metrics: []*telemetry.Metrics{{
			Overrides: []*telemetry.MetricsOverrides{{Match: selectMetric(telemetry.MetricSelector_ALL_METRICS, telemetry.WorkloadMode_CLIENT_AND_SERVER), Disabled: wrapperspb.Bool(true)}},
		}}}),
	}
	stats, mx := gatewayStats(t, m)
	want := &statsapi.PluginConfig{DisableHostHeaderFallback: true, Metrics: []*statsapi.MetricConfig{
		{Name: "requests_total", Dimensions: map[string]string{"request_host": "request.host"}},
	}}
	for _, l := range []string{"0.0.0.0_8080", "0.0.0.0_31400"} {
		if len(stats[l]) == 0 {
			t.Errorf("no listener %s (listeners: %v)", l, stats)
		}
		for i, st := range stats[l] {
			if !proto.Equal(st, want) {
				t.Errorf("listener %s chain %d: istio.stats\n%v\nwant\n%v", l, i, st, want)
			}
		}
	}
	if !mx["0.0.0.0_8080"] {
		t.Errorf("the HTTP listener's HCM does not start with %s (peer_metadata)", MetadataExchangeFilter)
	}

	// A Telemetry selecting the gateway's pod turns the client metrics off there.
	m.Istio.Telemetries = append(m.Istio.Telemetries, telemetryOf("istio-system", "quiet-gateway", &telemetry.Telemetry{
		Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"istio": "ingressgateway"}},
		Metrics: []*telemetry.Metrics{{Overrides: []*telemetry.MetricsOverrides{{
			Match: selectMetric(telemetry.MetricSelector_ALL_METRICS, telemetry.WorkloadMode_CLIENT), Disabled: wrapperspb.Bool(true),
		}}}},
	}))
	stats, _ = gatewayStats(t, m)
	for l, sts := range stats {
		for i, st := range sts {
			if st != nil {
				t.Errorf("listener %s chain %d has istio.stats %v; a Telemetry selecting the gateway turned client metrics off", l, i, st)
			}
		}
	}
}
