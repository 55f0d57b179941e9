package xds

import (
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	statsapi "istio.io/api/envoy/extensions/stats"
)

// TestWaypointAccessLogsFollowTelemetry pins a waypoint's access logs to the Telemetry
// API as istiod applies it to a waypoint: the root namespace's envoy provider turns them
// on, the waypoint's own namespace's disabled entry turns them off, another namespace's
// does not.
func TestWaypointAccessLogsFollowTelemetry(t *testing.T) {
	logs := func(extra string) int {
		m := buildWaypointModel(t, "waypoint.yaml", []byte(waypointScenario+extra))
		rs, err := GenerateWaypoint(m, shopWaypoint(t, m))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs[resource.ListenerType] {
			l := r.(*listener.Listener)
			if l.GetName() != ConnectOriginateListener {
				continue
			}
			tp := &tcpproxy.TcpProxy{}
			if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(tp); err != nil {
				t.Fatal(err)
			}
			return len(tp.GetAccessLog())
		}
		t.Fatal("no connect_originate listener")
		return 0
	}
	tel := func(name, ns, entry string) string {
		return "\n---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: " + name + ", namespace: " + ns +
			"}\nspec:\n  accessLogging:\n  - " + entry + "\n"
	}
	root := tel("mesh-default", "istio-system", "providers: [{name: envoy}]")
	if n := logs(root); n != 1 {
		t.Errorf("the root namespace's Telemetry gave the waypoint %d access logs, want 1", n)
	}
	if n := logs(root + tel("quiet", "default", "disabled: true")); n != 1 {
		t.Errorf("another namespace's Telemetry changed the waypoint's access logs: %d, want 1", n)
	}
	off := root + tel("quiet", "shop", "disabled: true")
	if n := logs(off); n != 0 {
		t.Errorf("the waypoint's namespace disabled access logging, and it has %d access logs", n)
	}
}

// waypointChainStats returns the istio.stats config of each chain of main_internal, by
// chain name (nil for a chain without one).
func waypointChainStats(t *testing.T, rs map[string][]types.Resource) map[string]*statsapi.PluginConfig {
	t.Helper()
	out := map[string]*statsapi.PluginConfig{}
	for _, r := range rs[resource.ListenerType] {
		l := r.(*listener.Listener)
		if l.GetName() != MainInternalListener {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			out[fc.GetName()] = nil
			var cfg *anypb.Any
			for _, f := range fc.GetFilters() {
				if f.GetName() == StatsFilter {
					cfg = f.GetTypedConfig()
				}
				if f.GetName() == wellknown.HTTPConnectionManager {
					h := &hcm.HttpConnectionManager{}
					if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
						t.Fatal(err)
					}
					for _, hf := range h.GetHttpFilters() {
						if hf.GetName() == StatsFilter {
							cfg = hf.GetTypedConfig()
						}
					}
				}
			}
			if cfg != nil {
				pc := &statsapi.PluginConfig{}
				if err := cfg.UnmarshalTo(pc); err != nil {
					t.Fatal(err)
				}
				out[fc.GetName()] = pc
			}
		}
	}
	return out
}

// TestWaypointStatsFollowTelemetry holds a waypoint's istio.stats to istiod's
// applicableTelemetries for a waypoint (fidelity scenario ambient-waypoint-telemetry):
// the root namespace's metrics overrides reach every chain, a service's own namespace's
// (when not the waypoint's) reach that service's chains only, the server mode's and not
// the client's, and a selector never selects the waypoint. The reporter stays
// SERVER_GATEWAY. Before, every chain had the fixed config whatever the Telemetries.
func TestWaypointStatsFollowTelemetry(t *testing.T) {
	t.Parallel()
	const telemetries = `
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: REQUEST_COUNT}
      tagOverrides:
        request_host: {value: request.host}
    - match: {metric: REQUEST_DURATION, mode: CLIENT}
      disabled: true
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: other-metrics, namespace: other}
spec:
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: REQUEST_COUNT, mode: SERVER}
      tagOverrides:
        destination_canonical_revision: {operation: REMOVE}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web-off, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: ALL_METRICS}
      disabled: true
`
	m := buildWaypointModel(t, "waypoint.yaml", []byte(waypointScenario+telemetries))
	rs, err := GenerateWaypoint(m, shopWaypoint(t, m))
	if err != nil {
		t.Fatal(err)
	}
	stats := waypointChainStats(t, rs)
	rootOnly := []*statsapi.MetricConfig{{Name: "requests_total", Dimensions: map[string]string{"request_host": "request.host"}}}
	withOther := []*statsapi.MetricConfig{{Name: "requests_total", Dimensions: map[string]string{"request_host": "request.host"}, TagsToRemove: []string{"destination_canonical_revision"}}}
	for chain, want := range map[string][]*statsapi.MetricConfig{
		InboundVIPClusterName(80, "http", "web.shop.svc.cluster.local"):    rootOnly,
		InboundVIPClusterName(5432, "tcp", "db.shop.svc.cluster.local"):    rootOnly,
		InboundVIPClusterName(8000, "http", "api.other.svc.cluster.local"): withOther,
		"direct-http": rootOnly,
	} {
		pc, ok := stats[chain]
		if !ok || pc == nil {
			t.Errorf("chain %s: no istio.stats (chains: %v)", chain, stats)
			continue
		}
		want := &statsapi.PluginConfig{DisableHostHeaderFallback: true, Reporter: statsapi.Reporter_SERVER_GATEWAY, Metrics: want}
		if !proto.Equal(pc, want) {
			t.Errorf("chain %s: istio.stats\n%v\nwant\n%v", chain, pc, want)
		}
	}

	// ALL_METRICS disabled in the waypoint's namespace takes istio.stats off its chains.
	const off = `
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: shop-off, namespace: shop}
spec:
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: ALL_METRICS, mode: SERVER}
      disabled: true
`
	m = buildWaypointModel(t, "waypoint.yaml", []byte(waypointScenario+off))
	if rs, err = GenerateWaypoint(m, shopWaypoint(t, m)); err != nil {
		t.Fatal(err)
	}
	for chain, pc := range waypointChainStats(t, rs) {
		if pc != nil {
			t.Errorf("chain %s has istio.stats %v; the waypoint's namespace turned the server metrics off", chain, pc)
		}
	}
}
