package xds

import (
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
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
