package xds

import (
	"fmt"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/anypb"
	statsapi "istio.io/api/envoy/extensions/stats"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A waypoint's request metrics, as istiod sends them under Istio's default mesh config
// (defaultProviders.metrics: prometheus; pilot/pkg/model/telemetry.go): every chain of
// main_internal carries istio.stats with reporter SERVER_GATEWAY, which istio-proxy
// reports as reporter="waypoint". An HTTP chain has it after the upstream peer_metadata
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

// waypointStatsConfig is the waypoint's stats.PluginConfig.
func waypointStatsConfig() (*anypb.Any, error) {
	return anypb.New(&statsapi.PluginConfig{DisableHostHeaderFallback: true, Reporter: statsapi.Reporter_SERVER_GATEWAY})
}

// addWaypointStats adds istio.stats to every chain of a waypoint's main_internal.
func addWaypointStats(l *listener.Listener) error {
	st, err := waypointStatsConfig()
	if err != nil {
		return err
	}
	for _, fc := range l.GetFilterChains() {
		fs := fc.GetFilters()
		if len(fs) == 0 {
			continue
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
