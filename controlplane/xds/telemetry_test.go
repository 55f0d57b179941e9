package xds

import (
	"slices"
	"testing"

	udpa "github.com/cncf/xds/go/udpa/type/v1"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statsapi "istio.io/api/envoy/extensions/stats"
)

// terminalFilter returns a chain's last network filter (tcp_proxy or the HCM), after
// Istio's metadata exchange, RBAC and stats filters.
func terminalFilter(fc *listener.FilterChain) *listener.Filter {
	fs := fc.GetFilters()
	return fs[len(fs)-1]
}

// A sidecar gets istiod's telemetry filters: the TCP metadata exchange on inbound chains
// and outbound clusters, peer metadata headers and istio.stats in every HCM, istio.stats
// before every tcp_proxy but virtualOutbound's loop guard; inbound stats do not fall back
// to the Host header.
func TestTelemetryFilters(t *testing.T) {
	t.Parallel()
	res := generate(t, helloModel(), "backend-v1")
	for _, r := range res[resource.ClusterType] {
		c := r.(*cluster.Cluster)
		want := c.GetName() == PassthroughCluster || c.GetType() == cluster.Cluster_EDS
		got := len(c.GetFilters()) == 1 && c.GetFilters()[0].GetName() == MetadataExchangeFilter
		if got != want {
			t.Errorf("cluster %s: metadata exchange filter %v, want %v", c.GetName(), got, want)
		}
		if got {
			var ts udpa.TypedStruct
			if err := c.GetFilters()[0].GetTypedConfig().UnmarshalTo(&ts); err != nil || ts.GetTypeUrl() != mxConfigType ||
				ts.GetValue().GetFields()["protocol"].GetStringValue() != "istio-peer-exchange" {
				t.Errorf("cluster %s: mx config %v %v", c.GetName(), ts.GetTypeUrl(), err)
			}
		}
	}
	vi := findListener(t, res, VirtualInboundListener)
	for _, fc := range vi.GetFilterChains() {
		var names []string
		for _, f := range fc.GetFilters() {
			names = append(names, f.GetName())
		}
		if names[0] != MetadataExchangeFilter {
			t.Errorf("inbound chain %s filters %q: no metadata exchange first", fc.GetName(), names)
		}
		if terminalFilter(fc).GetName() == "envoy.filters.network.tcp_proxy" {
			st := fc.GetFilters()[len(fc.GetFilters())-2]
			var pc statsapi.PluginConfig
			if st.GetName() != StatsFilter || st.GetTypedConfig().UnmarshalTo(&pc) != nil || !pc.GetDisableHostHeaderFallback() {
				t.Errorf("inbound chain %s: no inbound istio.stats before tcp_proxy: %q", fc.GetName(), names)
			}
		}
	}
	got := httpFilterNames(t, res, "0.0.0.0_8080")
	if got[0] != MetadataExchangeFilter || got[len(got)-2] != StatsFilter || !slices.Contains(got, ALPNFilter) {
		t.Errorf("outbound HTTP filters %q", got)
	}
	vo := findListener(t, res, VirtualOutboundListener)
	for _, fc := range vo.GetFilterChains() {
		if len(fc.GetFilters()) > 0 && fc.GetFilters()[0].GetName() == MetadataExchangeFilter {
			t.Errorf("outbound chain %s has the network metadata exchange (istiod puts it on clusters)", fc.GetName())
		}
		if stats := len(fc.GetFilters()) == 2 && fc.GetFilters()[0].GetName() == StatsFilter; stats == (fc.GetName() == VirtualOutboundListener+"-blackhole") {
			t.Errorf("outbound chain %s filters: istio.stats %v", fc.GetName(), stats)
		}
	}
}
