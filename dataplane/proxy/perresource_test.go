package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// configDumpOf reads /config_dump over the admin API and returns its dump of type T.
func configDumpOf[T proto.Message](t *testing.T, srv *Server, newT func() T) T {
	t.Helper()
	code, body := adminGet(t, srv, "/config_dump")
	if code != http.StatusOK {
		t.Fatalf("/config_dump = %d %s", code, body)
	}
	var d adminv3.ConfigDump
	if err := protojson.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("parse /config_dump: %v", err)
	}
	out := newT()
	for _, a := range d.GetConfigs() {
		if a.MessageIs(out) {
			if err := a.UnmarshalTo(out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("/config_dump has no %T", out)
	return out
}

func listenersDump(t *testing.T, srv *Server) *adminv3.ListenersConfigDump {
	t.Helper()
	return configDumpOf(t, srv, func() *adminv3.ListenersConfigDump { return &adminv3.ListenersConfigDump{} })
}

// dynamicListener returns the named entry of /config_dump's dynamic_listeners, or nil.
func dynamicListener(t *testing.T, srv *Server, name string) *adminv3.ListenersConfigDump_DynamicListener {
	t.Helper()
	for _, dl := range listenersDump(t, srv).GetDynamicListeners() {
		if dl.GetName() == name {
			return dl
		}
	}
	return nil
}

func anys(t *testing.T, msgs ...proto.Message) []*anypb.Any {
	t.Helper()
	out := make([]*anypb.Any, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, mustAnyT(t, m))
	}
	return out
}

// TestLDSAppliesEachListenerOnItsOwn pins Envoy's LdsApiImpl: in one SotW response the
// valid listeners are added, the invalid ones refused (a running one keeps its config),
// the listeners absent are removed, and the response is NACKed with the last applied
// version and "Error adding/updating listener(s) <name>: <reason>\n..."; /config_dump
// then shows the refusals under error_state and the listeners' version moves on.
func TestLDSAppliesEachListenerOnItsOwn(t *testing.T) {
	b1 := backend(t, "b1")
	x := startXDS(t)
	const node = "sidecar~127.0.0.1~web.default~default.svc.cluster.local"
	x.set(node, "v1", snapshotV(t, []netip.AddrPort{b1}, httpListener(t, "gone", "127.0.0.1", 0, "8080")))
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), testBootstrap(x.socket)), nil)
	eventually(t, "LIVE", func() bool { code, _ := adminGet(t, srv, "/ready"); return code == http.StatusOK })
	eventually(t, "ACK of LDS v1", func() bool { return x.acked(xdsclient.ListenerType, "v1") })
	addr, _ := srv.ListenerAddr("web")
	url := "http://" + addr.String() + "/"
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	st := srv.StatsStore()
	success := st.Value("listener_manager.lds.update_success")

	// v2: web turns invalid, redis is new and invalid, added is new and valid, gone is absent.
	res := snapshotV(t, []netip.AddrPort{b1})
	webBad := proto.Clone(res[resource.ListenerType][0].(*listenerv3.Listener)).(*listenerv3.Listener)
	webBad.FilterChains[0].Filters = []*listenerv3.Filter{redisFilter(t)}
	redis := &listenerv3.Listener{Name: "redis", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{redisFilter(t)}}}}
	res[resource.ListenerType] = []cachetypes.Resource{webBad, redis, httpListener(t, "added", "127.0.0.1", 0, "8080")}
	x.set(node, "v2", res)

	eventually(t, "a NACK of LDS v2", func() bool { return x.nack(xdsclient.ListenerType) != "" })
	unsupported := "filter_chains[0].filters[0].typed_config: unsupported type envoy.extensions.filters.network.redis_proxy.v3.RedisProxy"
	// One line per refused listener, in the order of the response (the snapshot cache
	// sends resources in map order, so either order is right).
	web := "web: listener 'web': " + unsupported + "\n"
	redisLine := "redis: listener 'redis': " + unsupported + "\n"
	const head = "Error adding/updating listener(s) "
	if got := x.nack(xdsclient.ListenerType); got != head+web+redisLine && got != head+redisLine+web {
		t.Errorf("NACK = %q, want %q with both lines", got, head+web+redisLine)
	}
	for _, r := range x.requests() {
		if r.TypeURL == xdsclient.ListenerType && r.Error != "" && r.Version != "v1" {
			t.Errorf("NACK carries version %q, want the last ACKed v1", r.Version)
		}
	}
	if _, ok := srv.ListenerAddr("added"); !ok {
		t.Error("the valid listener of the NACKed response was not added")
	}
	if _, ok := srv.ListenerAddr("gone"); ok {
		t.Error("the listener absent from the NACKed response was not removed")
	}
	if _, ok := srv.ListenerAddr("redis"); ok {
		t.Error("the refused listener redis is running")
	}
	if code, _, h := get(t, client, url, "backend"); code != http.StatusOK || h.Get("X-Backend") != "b1" {
		t.Errorf("the refused update of web must leave its old config serving: %d", code)
	}
	if got := st.Value("listener_manager.lds.update_success"); got != success {
		t.Errorf("lds.update_success = %d after a NACK, want %d", got, success)
	}
	if st.Value("listener_manager.lds.update_rejected") < 1 {
		t.Error("lds.update_rejected not counted")
	}

	d := listenersDump(t, srv)
	if d.GetVersionInfo() != "v2" {
		t.Errorf("listeners version_info = %q, want v2 (something of it applied, as Envoy's any_applied)", d.GetVersionInfo())
	}
	byName := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
	var unnamed []*adminv3.UpdateFailureState
	for _, dl := range d.GetDynamicListeners() {
		if dl.GetName() == "" {
			unnamed = append(unnamed, dl.GetErrorState())
			continue
		}
		byName[dl.GetName()] = dl
	}
	if web := byName["web"]; web.GetActiveState().GetVersionInfo() != "v1" || web.GetErrorState() == nil {
		t.Errorf("web = %v, want its v1 active_state and an error_state", web)
	}
	es := byName["web"].GetErrorState()
	var failedWeb listenerv3.Listener
	if es.GetFailedConfiguration().UnmarshalTo(&failedWeb) != nil || !proto.Equal(&failedWeb, webBad) ||
		es.GetLastUpdateAttempt() == nil || time.Since(es.GetLastUpdateAttempt().AsTime()) > time.Minute ||
		es.GetDetails() != "listener 'web': "+unsupported {
		t.Errorf("web's error_state = %v, want the refused config, the attempt's time and the reason", es)
	}
	if r := byName["redis"]; r.GetActiveState() != nil || !strings.Contains(r.GetErrorState().GetDetails(), unsupported) {
		t.Errorf("redis = %v, want an error_state only", r)
	}
	if a := byName["added"]; a.GetActiveState().GetVersionInfo() != "v2" || a.GetErrorState() != nil {
		t.Errorf("added = %v, want active at v2", a)
	}
	if _, ok := byName["gone"]; ok {
		t.Error("config_dump still lists the removed listener gone")
	}
	if len(unnamed) != 2 || unnamed[0].GetLastUpdateAttempt() != nil || unnamed[0].GetDetails() == "" {
		t.Errorf("unnamed error states = %v, want one per refusal without a time (Envoy's overall_error_state_)", unnamed)
	}

	// v3 is valid: ACKed, and the error states are gone.
	x.set(node, "v3", snapshotV(t, []netip.AddrPort{b1}))
	eventually(t, "ACK of LDS v3", func() bool { return x.acked(xdsclient.ListenerType, "v3") })
	for _, dl := range listenersDump(t, srv).GetDynamicListeners() {
		if dl.GetErrorState() != nil {
			t.Errorf("after a good update %q still has an error_state", dl.GetName())
		}
	}
}

// TestLDSRefusesADuplicateNameAndABindFailureOnTheirOwn pins two more of Envoy's
// per-listener refusals: "duplicate listener <name> found" (the first one applies) and
// a listener whose address cannot be bound.
func TestLDSRefusesADuplicateNameAndABindFailureOnTheirOwn(t *testing.T) {
	srv := newUnstartedForApply(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	tp := netip.MustParseAddrPort(taken.Addr().String())
	first := httpListener(t, "dup", "127.0.0.1", 0, "8080")
	second := httpListener(t, "dup", "127.0.0.2", 0, "8080")
	busy := httpListener(t, "busy", "127.0.0.1", uint32(tp.Port()), "8080")
	err = srv.Apply(xdsclient.ListenerType, "v1", anys(t, first, second, busy, httpListener(t, "ok", "127.0.0.1", 0, "8080")))
	if err == nil || !strings.HasPrefix(err.Error(), "Error adding/updating listener(s) dup: duplicate listener dup found\nbusy: listener 'busy': cannot bind '127.0.0.1:") {
		t.Fatalf("Apply = %v, want the duplicate and the bind failure refused", err)
	}
	if _, ok := srv.ListenerAddr("ok"); !ok {
		t.Error("the valid listener was not added")
	}
	if a, ok := srv.ListenerAddr("dup"); !ok || a.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("dup = %v %v, want the first one on 127.0.0.1", a, ok)
	}
	if _, ok := srv.ListenerAddr("busy"); ok {
		t.Error("the listener that cannot bind is running")
	}
	d := srv.ConfigDump(false)
	var ld adminv3.ListenersConfigDump
	for _, a := range d.GetConfigs() {
		if a.MessageIs(&ld) {
			_ = a.UnmarshalTo(&ld)
		}
	}
	named := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
	for _, dl := range ld.GetDynamicListeners() {
		named[dl.GetName()] = dl
	}
	// A duplicate never reaches Envoy's listener manager, so only the unnamed entries
	// carry it; the bind failure is tracked by name.
	if named["dup"].GetErrorState() != nil || named["busy"].GetErrorState() == nil {
		t.Errorf("dynamic_listeners = %v", ld.GetDynamicListeners())
	}
}

// TestCDSAppliesEachClusterOnItsOwn pins Envoy's CdsApiHelper: the valid clusters of a
// response apply, the invalid ones are refused (a running one keeps its config), the
// absent ones are removed, and the NACK is "Error adding/updating cluster(s) <name>:
// <reason>, ..."; a resource failing its proto constraints rejects the whole response.
func TestCDSAppliesEachClusterOnItsOwn(t *testing.T) {
	srv := newUnstartedForApply(t)
	if err := srv.Apply(xdsclient.ClusterType, "v1", anys(t, edsCluster("a"), edsCluster("b"), edsCluster("gone"))); err != nil {
		t.Fatal(err)
	}
	aBad := edsCluster("a")
	aBad.LbPolicy = clusterv3.Cluster_RING_HASH
	newBad := edsCluster("bad")
	newBad.LbPolicy = clusterv3.Cluster_MAGLEV
	err := srv.Apply(xdsclient.ClusterType, "v2", anys(t, aBad, edsCluster("b"), edsCluster("new"), edsCluster("new"), newBad))
	want := "Error adding/updating cluster(s) a: cluster 'a': lb_policy: unsupported load balancing policy RING_HASH, " +
		"new: duplicate cluster new found, bad: cluster 'bad': lb_policy: unsupported load balancing policy MAGLEV"
	if err == nil || err.Error() != want {
		t.Fatalf("Apply = %v, want %q", err, want)
	}
	for name, want := range map[string]bool{"a": true, "b": true, "new": true, "gone": false, "bad": false} {
		if _, ok := srv.clusters.Get(name); ok != want {
			t.Errorf("cluster %s running = %v, want %v", name, ok, want)
		}
	}
	if c, _ := srv.clusters.Get("a"); c.Config().Proto.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN {
		t.Error("the refused update of a replaced its running config")
	}
	cd := configDumpOf(t, srv, func() *adminv3.ClustersConfigDump { return &adminv3.ClustersConfigDump{} })
	versions := map[string]string{}
	for _, dc := range cd.GetDynamicActiveClusters() {
		var c clusterv3.Cluster
		_ = dc.GetCluster().UnmarshalTo(&c)
		versions[c.GetName()] = dc.GetVersionInfo()
		if dc.GetErrorState() != nil {
			t.Errorf("cluster %s has an error_state; Envoy does not implement it for clusters", c.GetName())
		}
	}
	if cd.GetVersionInfo() != "v2" || versions["a"] != "v1" || versions["new"] != "v2" || len(versions) != 3 {
		t.Errorf("clusters dump version %q, per cluster %v; want v2 and a at v1, new at v2, 3 clusters", cd.GetVersionInfo(), versions)
	}

	// A resource violating its proto constraints rejects the response whole.
	neg := edsCluster("neg")
	neg.ConnectTimeout = durationpb.New(-time.Second)
	if err := srv.Apply(xdsclient.ClusterType, "v3", anys(t, edsCluster("a"), edsCluster("c"), neg)); err == nil || !strings.Contains(err.Error(), "ConnectTimeout") {
		t.Fatalf("Apply v3 = %v, want the constraint violation", err)
	}
	if _, ok := srv.clusters.Get("c"); ok {
		t.Error("a response rejected whole added a cluster")
	}

	// A response changing nothing leaves the version where it was, as Envoy's any_applied.
	if err := srv.Apply(xdsclient.ClusterType, "v4", anys(t, edsCluster("a"), edsCluster("b"), edsCluster("new"))); err != nil {
		t.Fatal(err)
	}
	if v := configDumpOf(t, srv, func() *adminv3.ClustersConfigDump { return &adminv3.ClustersConfigDump{} }).GetVersionInfo(); v != "v2" {
		t.Errorf("version after an update that changed nothing = %q, want v2", v)
	}
}

// TestHealthCheckFailClosesEveryHTTPConnection pins Envoy's /healthcheck/fail: /ready
// answers 503 DRAINING and every HTTP response closes its connection (the drain manager's
// drainClose is true for drain_type DEFAULT listeners); /healthcheck/ok undoes both.
func TestHealthCheckFailClosesEveryHTTPConnection(t *testing.T) {
	b1 := backend(t, "b1")
	boot := staticBootstrap(t)
	boot.StaticResources.Clusters[0].LoadAssignment = assignment("static", b1)
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), boot), nil)
	addr, ok := srv.ListenerAddr("inbound")
	if !ok {
		t.Fatal("no inbound listener")
	}
	url := "http://" + addr.String() + "/"
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	// do sends one GET and reports whether it reused a connection and the response
	// asked to close it; protoMajor is the HTTP major version of the last response.
	protoMajor := 0
	do := func() (reused, closed bool) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET = %d", resp.StatusCode)
		}
		protoMajor = resp.ProtoMajor
		return reused, resp.Close
	}
	if _, closed := do(); closed {
		t.Fatal("a healthy proxy closed the connection")
	}
	if reused, _ := do(); !reused {
		t.Fatal("keep-alive connection not reused while healthy")
	}
	drains := srv.StatsStore().Value("http.in.downstream_cx_drain_close")
	if code, _ := adminPost(t, srv, "/healthcheck/fail"); code != http.StatusOK {
		t.Fatalf("/healthcheck/fail = %d", code)
	}
	if code, body := adminGet(t, srv, "/ready"); code != http.StatusServiceUnavailable || body != "DRAINING\n" {
		t.Errorf("/ready after /healthcheck/fail = %d %q", code, body)
	}
	for i := range 3 {
		if _, closed := do(); !closed {
			t.Errorf("response %d after /healthcheck/fail does not close its connection", i)
		}
	}
	if got := srv.StatsStore().Value("http.in.downstream_cx_drain_close"); got < drains+3 {
		t.Errorf("http.in.downstream_cx_drain_close = %d, want >= %d", got, drains+3)
	}
	if code, _ := adminPost(t, srv, "/healthcheck/ok"); code != http.StatusOK {
		t.Fatalf("/healthcheck/ok = %d", code)
	}
	if code, _ := adminGet(t, srv, "/ready"); code != http.StatusOK {
		t.Errorf("/ready after /healthcheck/ok = %d", code)
	}
	if _, closed := do(); closed {
		t.Error("a response after /healthcheck/ok closed its connection")
	}
	if reused, closed := do(); !reused || closed {
		t.Errorf("after /healthcheck/ok: reused %v closed %v, want keep-alive", reused, closed)
	}

	// HTTP/2 (h2c): the connection of a response served while health checks fail gets a
	// GOAWAY, so a later request goes out on a new connection.
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	if do(); protoMajor != 2 {
		t.Fatalf("h2c client got HTTP/%d, want HTTP/2", protoMajor)
	}
	if reused, _ := do(); !reused {
		t.Fatal("h2c connection not reused while healthy")
	}
	adminPost(t, srv, "/healthcheck/fail")
	t.Cleanup(func() { adminPost(t, srv, "/healthcheck/ok") })
	do()
	eventually(t, "an h2c request on a new connection after the GOAWAY", func() bool { reused, _ := do(); return !reused })
}
