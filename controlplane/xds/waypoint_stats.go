package xds

import (
	"fmt"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	statsapi "istio.io/api/envoy/extensions/stats"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A waypoint's request metrics, as istiod sends them under Istio's default mesh config
// (defaultProviders.metrics: prometheus; pilot/pkg/model/telemetry.go): every chain of
// main_internal carries istio.stats with reporter SERVER_GATEWAY, which istio-proxy
// reports as reporter="waypoint", and the server mode's metrics overrides of the
// Telemetries that apply to the chain's service (waypointTelemetries). An HTTP chain has it after the upstream peer_metadata
// filter, right before the router (buildWaypointHTTPFilters' telemetry filters); a TCP
// chain right before tcp_proxy (buildCompleteNetworkFilters' metrics filters). The class
// is sidecar inbound, so the Host header is never the service (disable_host_header_fallback).

// waypointMesh is the mesh settings of waypoint w's access logs: the lab's MeshConfig
// with the Telemetry API's access logging of the root namespace, else of the waypoint's
// own namespace (MeshFor), as istiod's applicableTelemetries for a waypoint proxy; a
// Telemetry's workload selector never selects a waypoint (istiod attaches only
// targetRefs to one, which a lab's Telemetry refuses).
func waypointMesh(m *model.Model, w *model.Waypoint) model.MeshConfig {
	return MeshFor(m, &model.Pod{Namespace: w.Namespace})
}

// waypointStatsConfig is the istio.stats config of a waypoint's chain under the
// metrics of plan: the server mode's (istiod builds a waypoint's filters as the sidecar
// inbound class), reporter SERVER_GATEWAY; nil when the plan turns them off.
func waypointStatsConfig(plan metricsPlan) (*anypb.Any, error) {
	mm := plan.server
	if mm.off {
		return nil, nil
	}
	// Deterministic: dimensions are a map (see typedStruct).
	a := &anypb.Any{}
	pc := &statsapi.PluginConfig{DisableHostHeaderFallback: true, Reporter: statsapi.Reporter_SERVER_GATEWAY, Metrics: mm.metrics, TcpReportingDuration: plan.reporting}
	if err := anypb.MarshalFrom(a, pc, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// addWaypointStats adds istio.stats to every chain of a waypoint's main_internal, each
// under the Telemetries of its service (services: by chain name; a chain of no service,
// a workload's or direct-*, has the waypoint's own).
func addWaypointStats(m *model.Model, w *model.Waypoint, l *listener.Listener, services map[string]*model.Service) error {
	configs := map[*model.Service]*anypb.Any{}
	for _, fc := range l.GetFilterChains() {
		fs := fc.GetFilters()
		if len(fs) == 0 {
			continue
		}
		svc := services[fc.GetName()]
		st, ok := configs[svc]
		if !ok {
			var err error
			if st, err = waypointStatsConfig(mergeMetrics(waypointTelemetries(m, w, svc))); err != nil {
				return err
			}
			configs[svc] = st
		}
		if st == nil {
			continue // ALL_METRICS disabled for the server mode
		}
		terminal := fs[len(fs)-1]
		switch terminal.GetName() {
		case wellknown.TCPProxy:
			fc.Filters = append(fs[:len(fs)-1:len(fs)-1], &listener.Filter{Name: StatsFilter, ConfigType: &listener.Filter_TypedConfig{TypedConfig: st}}, terminal)
		case wellknown.HTTPConnectionManager:
			if err := addHCMStats(terminal, st); err != nil {
				return fmt.Errorf("listener %s chain %q: %w", l.GetName(), fc.GetName(), err)
			}
		}
	}
	return nil
}

// addHCMStats puts istio.stats right before an HCM's router.
func addHCMStats(f *listener.Filter, st *anypb.Any) error {
	m := &hcm.HttpConnectionManager{}
	if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
		return fmt.Errorf("unpack %s: %w", f.GetName(), err)
	}
	hs := m.GetHttpFilters()
	if len(hs) == 0 {
		return nil
	}
	router := hs[len(hs)-1]
	m.HttpFilters = append(hs[:len(hs)-1:len(hs)-1], &hcm.HttpFilter{Name: StatsFilter, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: st}}, router)
	cfg, err := typed(m)
	if err != nil {
		return err
	}
	f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: cfg}
	return nil
}
