package proxy

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// namedCase is one SotW response of a named type (RDS or EDS) applied after version v1
// gave every subscribed name a good resource.
type namedCase struct {
	name string
	// subscribed are successive subscriptions: a later step's new names are newer watches.
	subscribed [][]string
	// v2 builds the response: good(name, tag) or bad(name) per resource.
	v2 func(good func(name, tag string) proto.Message, bad func(name string) proto.Message) []proto.Message
	// refused names the resource whose refusal is the whole NACK; "" wants an ACK.
	refused string
	// whole wants the response rejected whole with an error containing this text.
	whole string
	// want is the tag serving each subscribed name after v2 (v1's tag is "<name>-v1").
	want map[string]string
}

// namedCases pins what Envoy's SotW gRPC mux (GrpcMuxImpl::processDiscoveryResources)
// does with a response of a type subscribed by name: one watch per subscription, walked
// newest first (each new watch is emplaced at the front of the list), each given its own
// resource; the first exception ends the walk and is the NACK's error_detail, so the
// watches walked before it keep what they applied and the rest keep their last good
// resource. The decoder validates every resource first, so a constraint violation
// rejects the response whole.
var namedCases = []namedCase{
	{
		name:       "a valid resource of a newer subscription applies and the refused one keeps its last good version",
		subscribed: [][]string{{"old"}, {"old", "new"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{bad("old"), good("new", "new-v2")}
		},
		refused: "old",
		want:    map[string]string{"new": "new-v2", "old": "old-v1"},
	},
	{
		name:       "a valid resource of an older subscription than the refused one is not applied (the walk stops at the first exception)",
		subscribed: [][]string{{"old"}, {"old", "new"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{good("old", "old-v2"), bad("new")}
		},
		refused: "new",
		want:    map[string]string{"new": "new-v1", "old": "old-v1"},
	},
	{
		name:       "subscriptions made by one update are walked last created first",
		subscribed: [][]string{{"a", "b"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{good("a", "a-v2"), bad("b")}
		},
		refused: "b",
		want:    map[string]string{"a": "a-v1", "b": "b-v1"},
	},
	{
		name:       "the NACK carries the first refusal only",
		subscribed: [][]string{{"old"}, {"old", "new"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{bad("old"), bad("new")}
		},
		refused: "new",
		want:    map[string]string{"new": "new-v1", "old": "old-v1"},
	},
	{
		name:       "a subscription whose resource is absent keeps its last one",
		subscribed: [][]string{{"old"}, {"old", "new"}},
		v2: func(good func(string, string) proto.Message, _ func(string) proto.Message) []proto.Message {
			return []proto.Message{good("new", "new-v2")}
		},
		want: map[string]string{"new": "new-v2", "old": "old-v1"},
	},
	{
		name:       "a resource nobody subscribes to is ignored, even one that would be refused",
		subscribed: [][]string{{"old"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{bad("stranger"), good("old", "old-v2")}
		},
		want: map[string]string{"old": "old-v2"},
	},
	{
		name:       "of two resources with one name the first counts (a valid first)",
		subscribed: [][]string{{"old"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{good("old", "old-v2"), bad("old")}
		},
		want: map[string]string{"old": "old-v2"},
	},
	{
		name:       "of two resources with one name the first counts (a refused first)",
		subscribed: [][]string{{"old"}},
		v2: func(good func(string, string) proto.Message, bad func(string) proto.Message) []proto.Message {
			return []proto.Message{bad("old"), good("old", "old-v2")}
		},
		refused: "old",
		want:    map[string]string{"old": "old-v1"},
	},
}

// TestRDSAppliesEachSubscriptionNewestFirstUntilARefusal runs namedCases on route
// configurations: the serving route table, the NACK, the rds counters and
// dynamic_route_configs (per-configuration version_info and never an error_state: Envoy's
// RouteConfigProviderManager dumps none).
func TestRDSAppliesEachSubscriptionNewestFirstUntilARefusal(t *testing.T) {
	good := func(name, tag string) *routev3.RouteConfiguration {
		return routeConfig(name, vhostTo("vh", []string{"*"}, tag))
	}
	bad := func(name string) *routev3.RouteConfiguration {
		rc := good(name, name+"-bad")
		rc.VirtualHosts[0].Routes[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
		return rc
	}
	for _, tc := range append(namedCases, namedCase{
		name:       "a resource violating its proto constraints rejects the response whole",
		subscribed: [][]string{{"old"}, {"old", "new"}},
		v2: func(good func(string, string) proto.Message, _ func(string) proto.Message) []proto.Message {
			noDomains := good("old", "old-v2").(*routev3.RouteConfiguration)
			noDomains.VirtualHosts[0].Domains = nil
			return []proto.Message{good("new", "new-v2"), noDomains}
		},
		whole: "route configuration 'old': invalid RouteConfiguration.VirtualHosts[0]",
		want:  map[string]string{"new": "new-v1", "old": "old-v1"},
	}) {
		t.Run(tc.name, func(t *testing.T) {
			srv := newUnstartedForApply(t)
			var v1 []proto.Message
			for _, names := range tc.subscribed {
				srv.subscribe(xdsclient.RouteType, names)
			}
			for _, name := range tc.subscribed[len(tc.subscribed)-1] {
				v1 = append(v1, good(name, name+"-v1"))
			}
			if err := srv.Apply(xdsclient.RouteType, "v1", anys(t, v1...)); err != nil {
				t.Fatalf("Apply v1 = %v", err)
			}
			st := srv.StatsStore()
			rejected, success := st.Value("http_route_config.rds.update_rejected"), st.Value("http_route_config.rds.update_success")

			err := srv.Apply(xdsclient.RouteType, "v2", anys(t, tc.v2(
				func(n, tag string) proto.Message { return good(n, tag) },
				func(n string) proto.Message { return bad(n) })...))

			checkNACK(t, err, tc, func(name string) error { _, err := httpconn.CompileRoutes(bad(name)); return err })
			if wantRejected := tc.refused != "" || tc.whole != ""; (st.Value("http_route_config.rds.update_rejected") > rejected) != wantRejected ||
				(st.Value("http_route_config.rds.update_success") > success) == wantRejected {
				t.Errorf("rds.update_rejected %d -> %d, update_success %d -> %d; want a rejection: %v", rejected,
					st.Value("http_route_config.rds.update_rejected"), success, st.Value("http_route_config.rds.update_success"), wantRejected)
			}
			dump := map[string]*adminv3.RoutesConfigDump_DynamicRouteConfig{}
			for _, dr := range configDumpOf(t, srv, func() *adminv3.RoutesConfigDump { return &adminv3.RoutesConfigDump{} }).GetDynamicRouteConfigs() {
				var rc routev3.RouteConfiguration
				if err := dr.GetRouteConfig().UnmarshalTo(&rc); err != nil {
					t.Fatal(err)
				}
				dump[rc.GetName()] = dr
				if dr.GetErrorState() != nil {
					t.Errorf("dynamic_route_configs %s has an error_state; Envoy dumps none for routes", rc.GetName())
				}
			}
			for name, tag := range tc.want {
				table, ok := srv.routes.Get(name)
				if !ok {
					t.Errorf("route configuration %s is not serving", name)
					continue
				}
				if _, r := table.Match("anything", "/"); r == nil || r.Cluster != tag {
					t.Errorf("route configuration %s routes to %v, want %s", name, r, tag)
				}
				if v := dump[name].GetVersionInfo(); v != tag[len(tag)-2:] {
					t.Errorf("dynamic_route_configs %s version_info = %q, want %q", name, v, tag[len(tag)-2:])
				}
			}
			if len(dump) != len(tc.want) {
				t.Errorf("dynamic_route_configs has %d entries, want %d", len(dump), len(tc.want))
			}
		})
	}
}

// TestEDSAppliesEachSubscriptionNewestFirstUntilARefusal runs namedCases on load
// assignments of EDS clusters: the hosts each cluster serves, the NACK, the eds counters
// and dynamic_endpoint_configs (never an error_state: Envoy's config_dump has none for
// endpoints).
func TestEDSAppliesEachSubscriptionNewestFirstUntilARefusal(t *testing.T) {
	// Each tag is a distinct host port, so the serving hosts tell which version applied.
	ports := map[string]uint16{}
	port := func(tag string) uint16 {
		if _, ok := ports[tag]; !ok {
			ports[tag] = uint16(20000 + len(ports))
		}
		return ports[tag]
	}
	good := func(name, tag string) *endpointv3.ClusterLoadAssignment {
		return assignment(name, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port(tag)))
	}
	bad := func(name string) *endpointv3.ClusterLoadAssignment {
		la := good(name, name+"-bad")
		la.Endpoints[0].Priority = 1
		return la
	}
	for _, tc := range append(namedCases, namedCase{
		name:       "a resource violating its proto constraints rejects the response whole",
		subscribed: [][]string{{"old"}, {"old", "new"}},
		v2: func(good func(string, string) proto.Message, _ func(string) proto.Message) []proto.Message {
			zero := good("old", "old-v2").(*endpointv3.ClusterLoadAssignment)
			zero.Endpoints[0].LbEndpoints[0].LoadBalancingWeight = wrapperspb.UInt32(0)
			return []proto.Message{good("new", "new-v2"), zero}
		},
		whole: "cluster load assignment 'old': invalid ClusterLoadAssignment.Endpoints[0]",
		want:  map[string]string{"new": "new-v1", "old": "old-v1"},
	}) {
		t.Run(tc.name, func(t *testing.T) {
			srv := newUnstartedForApply(t)
			// Each CDS step adds EDS clusters, whose EDS subscriptions are newer watches.
			for i, names := range tc.subscribed {
				var cs []proto.Message
				for _, n := range names {
					cs = append(cs, edsCluster(n))
				}
				if err := srv.Apply(xdsclient.ClusterType, fmt.Sprintf("c%d", i), anys(t, cs...)); err != nil {
					t.Fatalf("Apply CDS = %v", err)
				}
			}
			var v1 []proto.Message
			for _, name := range tc.subscribed[len(tc.subscribed)-1] {
				v1 = append(v1, good(name, name+"-v1"))
			}
			if err := srv.Apply(xdsclient.EndpointType, "v1", anys(t, v1...)); err != nil {
				t.Fatalf("Apply v1 = %v", err)
			}
			st := srv.StatsStore()
			rejected, success := st.Value("cluster_manager.eds.update_rejected"), st.Value("cluster_manager.eds.update_success")
			subscribed := tc.subscribed[len(tc.subscribed)-1]
			clusterRejected := map[string]int64{}
			for _, n := range subscribed {
				clusterRejected[n] = st.Value("cluster." + n + ".update_rejected")
			}

			err := srv.Apply(xdsclient.EndpointType, "v2", anys(t, tc.v2(
				func(n, tag string) proto.Message { return good(n, tag) },
				func(n string) proto.Message { return bad(n) })...))

			checkNACK(t, err, tc, func(name string) error { _, err := cluster.CompileAssignment(bad(name)); return err })
			if wantRejected := tc.refused != "" || tc.whole != ""; (st.Value("cluster_manager.eds.update_rejected") > rejected) != wantRejected ||
				(st.Value("cluster_manager.eds.update_success") > success) == wantRejected {
				t.Errorf("eds.update_rejected %d -> %d, update_success %d -> %d; want a rejection: %v", rejected,
					st.Value("cluster_manager.eds.update_rejected"), success, st.Value("cluster_manager.eds.update_success"), wantRejected)
			}
			// Envoy's per-cluster counters: a rejection reaches every subscription once.
			for _, n := range subscribed {
				want := clusterRejected[n]
				if tc.refused != "" || tc.whole != "" {
					want++
				}
				if got := st.Value("cluster." + n + ".update_rejected"); got != want {
					t.Errorf("cluster.%s.update_rejected = %d, want %d", n, got, want)
				}
			}
			dump := map[string]*adminv3.EndpointsConfigDump_DynamicEndpointConfig{}
			for _, a := range srv.ConfigDump(true).GetConfigs() {
				var ed adminv3.EndpointsConfigDump
				if !a.MessageIs(&ed) {
					continue
				}
				if err := a.UnmarshalTo(&ed); err != nil {
					t.Fatal(err)
				}
				for _, de := range ed.GetDynamicEndpointConfigs() {
					var la endpointv3.ClusterLoadAssignment
					if err := de.GetEndpointConfig().UnmarshalTo(&la); err != nil {
						t.Fatal(err)
					}
					dump[la.GetClusterName()] = de
					if de.GetErrorState() != nil {
						t.Errorf("dynamic_endpoint_configs %s has an error_state; Envoy dumps none for endpoints", la.GetClusterName())
					}
				}
			}
			for name, tag := range tc.want {
				c, ok := srv.clusters.Get(name)
				if !ok {
					t.Fatalf("cluster %s is missing", name)
				}
				hosts := c.Hosts()
				if len(hosts) != 1 || hosts[0].Addr.Port() != port(tag) {
					t.Errorf("cluster %s serves %v, want the host of %s (port %d)", name, hosts, tag, port(tag))
				}
				if v := dump[name].GetVersionInfo(); v != tag[len(tag)-2:] {
					t.Errorf("dynamic_endpoint_configs %s version_info = %q, want %q", name, v, tag[len(tag)-2:])
				}
			}
		})
	}
}

// checkNACK checks Apply's result against a case: an ACK, the refusal of tc.refused
// exactly (its error is refusal(name)), or a whole rejection.
func checkNACK(t *testing.T, err error, tc namedCase, refusal func(name string) error) {
	t.Helper()
	switch {
	case tc.whole != "":
		if err == nil || !strings.Contains(err.Error(), tc.whole) {
			t.Errorf("Apply v2 = %v, want the whole response rejected with %q", err, tc.whole)
		}
	case tc.refused != "":
		want := refusal(tc.refused)
		if want == nil {
			t.Fatalf("the bad resource %s compiles", tc.refused)
		}
		if err == nil || err.Error() != want.Error() {
			t.Errorf("Apply v2 = %v, want the NACK %q", err, want)
		}
	default:
		if err != nil {
			t.Errorf("Apply v2 = %v, want an ACK", err)
		}
	}
}

// TestRDSResponseWithAValidAndARefusedConfigurationOverADS pins the same behaviour over
// a real ADS stream: route configurations "8080" (listener web) and "9090" (listener
// other) are subscribed by one LDS update, so Envoy's mux walks "9090" first; a response
// with a valid "9090" and a refused "8080" serves the new "9090", keeps "8080" at its
// last good version, and is NACKed with the last ACKed version and the refusal of
// "8080" alone; dynamic_route_configs shows each at its own version and no error_state.
func TestRDSResponseWithAValidAndARefusedConfigurationOverADS(t *testing.T) {
	b1 := backend(t, "b1")
	x := startXDS(t)
	const node = "sidecar~127.0.0.1~web.default~default.svc.cluster.local"
	snap := func(tag string, refuse8080 bool) map[resource.Type][]cachetypes.Resource {
		res := snapshotV(t, []netip.AddrPort{b1}, httpListener(t, "other", "127.0.0.1", 0, "9090"))
		vh := vhostTo("any", []string{"*"}, backendCluster)
		vh.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-route-version", Value: tag}}}
		res[resource.RouteType] = append(res[resource.RouteType], routeConfig("9090", vh))
		if refuse8080 {
			rc := res[resource.RouteType][0].(*routev3.RouteConfiguration)
			rc.VirtualHosts[0].Routes[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
		}
		return res
	}
	x.set(node, "v1", snap("v1", false))
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), testBootstrap(x.socket)), nil)
	eventually(t, "ACK of RDS v1", func() bool { return x.acked(xdsclient.RouteType, "v1") })
	web, _ := srv.ListenerAddr("web")
	other, _ := srv.ListenerAddr("other")
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)

	x.set(node, "v2", snap("v2", true))
	eventually(t, "a NACK of RDS v2", func() bool { return x.nack(xdsclient.RouteType) != "" })
	want := "route configuration '8080': virtual_hosts[0].routes[0].route.cluster_header: field is not supported"
	if got := x.nack(xdsclient.RouteType); !strings.HasPrefix(got, want) {
		t.Errorf("NACK = %q, want the refusal of 8080 alone (%q...)", got, want)
	}
	for _, r := range x.requests() {
		if r.TypeURL == xdsclient.RouteType && r.Error != "" && r.Version != "v1" {
			t.Errorf("NACK carries version %q, want the last ACKed v1", r.Version)
		}
	}
	if code, _, h := get(t, client, "http://"+other.String()+"/", "anything"); code != http.StatusOK || h.Get("X-Route-Version") != "v2" {
		t.Errorf("other: %d x-route-version %q, want 200 from the applied 9090 at v2", code, h.Get("X-Route-Version"))
	}
	if code, _, h := get(t, client, "http://"+web.String()+"/", "backend"); code != http.StatusOK || h.Get("X-Backend") != "b1" {
		t.Errorf("web: %d, want the last good 8080 serving b1", code)
	}
	versions := map[string]string{}
	for _, dr := range configDumpOf(t, srv, func() *adminv3.RoutesConfigDump { return &adminv3.RoutesConfigDump{} }).GetDynamicRouteConfigs() {
		var rc routev3.RouteConfiguration
		_ = dr.GetRouteConfig().UnmarshalTo(&rc)
		versions[rc.GetName()] = dr.GetVersionInfo()
		if dr.GetErrorState() != nil {
			t.Errorf("route %s has an error_state; Envoy dumps none for routes", rc.GetName())
		}
	}
	if versions["9090"] != "v2" || versions["8080"] != "v1" {
		t.Errorf("dynamic_route_configs versions = %v, want 9090 at v2 and 8080 at v1", versions)
	}
	// Envoy's per-subscription counters (http.<stat_prefix>.rds.<name>.*): v1 applied to
	// both; each v2 (the server answers every NACK with it again) applied to 9090, walked
	// first as the newer watch, then its rejection reached both subscriptions.
	st := srv.StatsStore()
	rds := func(name, leaf string) int64 {
		return st.Value(fmt.Sprintf("http.%s.rds.%s.%s", statPrefixOf(t, srv, name), name, leaf))
	}
	if got := rds("8080", "update_success"); got != 1 {
		t.Errorf("rds 8080 update_success = %d, want 1 (v1 only)", got)
	}
	if rds("8080", "update_rejected") < 1 || rds("9090", "update_rejected") < 1 {
		t.Errorf("update_rejected: 8080 %d, 9090 %d; want the rejection counted by both subscriptions",
			rds("8080", "update_rejected"), rds("9090", "update_rejected"))
	}
	if got := rds("9090", "update_success"); got < 2 {
		t.Errorf("rds 9090 update_success = %d, want v1 and v2 applied", got)
	}
}

// statPrefixOf returns the stat_prefix of the HCM that uses route configuration rds.
func statPrefixOf(t *testing.T, srv *Server, rds string) string {
	t.Helper()
	for _, l := range srv.listeners.Configs() {
		for _, fc := range l.Chains {
			if fc.HTTP != nil && fc.HTTP.RDSName == rds {
				return fc.HTTP.StatPrefix
			}
		}
	}
	t.Fatalf("no HCM uses route configuration %s", rds)
	return ""
}
