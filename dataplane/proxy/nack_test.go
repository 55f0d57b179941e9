package proxy

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// TestNACKNamesTheFieldAndKeepsTheLastGoodConfig pins Envoy's behaviour for a response it
// cannot apply: the NACK's error_detail names the resource and the field (for LDS and
// CDS, which apply resource by resource, in LdsApiImpl's and CdsApiHelper's wording; for
// RDS the refusal of the route configuration alone), update_rejected counts it, and the
// last good config keeps serving. TestLDSAppliesEachListenerOnItsOwn,
// TestCDSAppliesEachClusterOnItsOwn and TestRDSAppliesEachSubscriptionNewestFirstUntilARefusal
// pin what of a partly refused response applies.
func TestNACKNamesTheFieldAndKeepsTheLastGoodConfig(t *testing.T) {
	b1 := backend(t, "b1")
	x := startXDS(t)
	const node = "sidecar~127.0.0.1~web.default~default.svc.cluster.local"
	x.set(node, "good", snapshotV(t, []netip.AddrPort{b1}))
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), testBootstrap(x.socket)), nil)
	eventually(t, "LIVE", func() bool { code, _ := adminGet(t, srv, "/ready"); return code == http.StatusOK })
	addr, _ := srv.ListenerAddr("web")
	url := "http://" + addr.String() + "/"
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)

	for i, tc := range []struct {
		name     string
		typeURL  string
		rejected string // the update_rejected counter
		mutate   func(res map[resource.Type][]cachetypes.Resource)
		want     string
	}{
		{
			name: "an unknown typed_config is refused", typeURL: xdsclient.ListenerType, rejected: "listener_manager.lds.update_rejected",
			mutate: func(res map[resource.Type][]cachetypes.Resource) {
				res[resource.ListenerType] = append(res[resource.ListenerType], &listenerv3.Listener{Name: "redis", Address: socketAddr("127.0.0.1", 0),
					FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{redisFilter(t)}}}})
			},
			want: "Error adding/updating listener(s) redis: listener 'redis': filter_chains[0].filters[0].typed_config: unsupported type envoy.extensions.filters.network.redis_proxy.v3.RedisProxy\n",
		},
		{
			name: "an unsupported field set to a non-default value is refused", typeURL: xdsclient.RouteType, rejected: "http_route_config.rds.update_rejected",
			mutate: func(res map[resource.Type][]cachetypes.Resource) {
				rc := res[resource.RouteType][0].(*routev3.RouteConfiguration)
				rc.VirtualHosts[0].Routes[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
			},
			want: "virtual_hosts[0].routes[0].route.cluster_header: field is not supported",
		},
		{
			name: "an invalid regex is refused", typeURL: xdsclient.RouteType, rejected: "http_route_config.rds.update_rejected",
			mutate: func(res map[resource.Type][]cachetypes.Resource) {
				rc := res[resource.RouteType][0].(*routev3.RouteConfiguration)
				rc.VirtualHosts[0].Routes[0].Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/items/(["}}
			},
			want: "match.safe_regex.regex",
		},
		{
			name: "an unsupported cluster policy is refused", typeURL: xdsclient.ClusterType, rejected: "cluster_manager.cds.update_rejected",
			mutate: func(res map[resource.Type][]cachetypes.Resource) {
				res[resource.ClusterType][0].(*clusterv3.Cluster).LbPolicy = clusterv3.Cluster_RING_HASH
			},
			want: "Error adding/updating cluster(s) " + backendCluster + ": cluster '" + backendCluster + "': lb_policy: unsupported load balancing policy RING_HASH",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(x.requests())
			rejected := srv.StatsStore().Value(tc.rejected)
			res := snapshotV(t, []netip.AddrPort{b1})
			tc.mutate(res)
			version := fmt.Sprintf("bad-%d", i)
			x.set(node, version, res)
			// A NACK of the previous case may be repeated (the cache re-sends a rejected
			// snapshot), so wait for the one that names this case's field.
			var nack seenRequest
			deadline := time.Now().Add(10 * time.Second)
			for nack.Error == "" {
				var seen []string
				for _, r := range x.requests()[before:] {
					if r.TypeURL == tc.typeURL && r.Error != "" {
						seen = append(seen, r.Error)
						if strings.Contains(r.Error, tc.want) {
							nack = r
						}
					}
				}
				if nack.Error == "" && time.Now().After(deadline) {
					t.Fatalf("no NACK of %s naming %q; NACKs seen: %q", version, tc.want, seen)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if nack.Version == version {
				t.Errorf("NACK carries the rejected version %q; Envoy sends the last applied one", version)
			}
			if got := srv.StatsStore().Value(tc.rejected); got <= rejected {
				t.Errorf("%s = %d, want > %d", tc.rejected, got, rejected)
			}
			if code, body, h := get(t, client, url, "backend"); code != http.StatusOK || h.Get("X-Backend") != "b1" {
				t.Errorf("after the NACK the last good config must serve: %d %q", code, body)
			}
			dumpOf := map[string]string{xdsclient.ListenerType: "dynamic_listeners", xdsclient.RouteType: "dynamic_route_configs", xdsclient.ClusterType: "dynamic_active_clusters"}
			_, dump := adminGet(t, srv, "/config_dump?resource="+dumpOf[tc.typeURL])
			if strings.Contains(dump, `"version_info": "`+version+`"`) || !strings.Contains(dump, `"version_info": "`) {
				t.Errorf("config_dump?resource=%s must keep the last good version, not %s:\n%s", dumpOf[tc.typeURL], version, dump)
			}
		})
	}
}
