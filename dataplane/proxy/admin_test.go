package proxy

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/meshlab/meshlab/internal/testutil"
)

// staticBootstrap has no dynamic resources: the server is LIVE at once, as Envoy is.
func staticBootstrap(tb testing.TB) *bootstrapv3.Bootstrap {
	tb.Helper()
	in := &listenerv3.Listener{
		Name: "inbound", Address: socketAddr("127.0.0.1", 0), TrafficDirection: corev3.TrafficDirection_INBOUND,
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{
			hcmInline(tb, "in", routeConfig("in", vhostTo("vh", []string{"*"}, "static"))),
		}}},
	}
	out := &listenerv3.Listener{
		Name: "outbound", Address: socketAddr("127.0.0.1", 0), TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcpProxy(tb, "out", "static")}}},
	}
	static := blackHoleCluster()
	static.Name = "static"
	static.LoadAssignment = assignment("static")
	return &bootstrapv3.Bootstrap{
		Node:            &corev3.Node{Id: "n", Cluster: "c"},
		Admin:           &bootstrapv3.Admin{Address: socketAddr("127.0.0.1", 0)},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{Listeners: []*listenerv3.Listener{in, out}, Clusters: []*clusterv3.Cluster{static}},
	}
}

func TestAdminLifecycle(t *testing.T) {
	path := writeBootstrap(t, t.TempDir(), staticBootstrap(t))
	opts, err := ParseArgs([]string{"-c", path, "--restart-epoch", "2", "--base-id", "9", "--service-node", "override",
		"--drain-strategy", "immediate", "--drain-time-s", "30"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(opts, testutil.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	<-srv.Started()
	exited := false
	t.Cleanup(func() {
		if !exited {
			srv.Quit()
			<-done
		}
	})

	if code, body := adminGet(t, srv, "/ready"); code != 200 || body != "LIVE\n" {
		t.Errorf("/ready = %d %q; a static-only config is LIVE at once", code, body)
	}
	_, info := adminGet(t, srv, "/server_info")
	var si struct {
		State              string `json:"state"`
		HotRestartVersion  string `json:"hot_restart_version"`
		CommandLineOptions struct {
			RestartEpoch  int    `json:"restart_epoch"`
			BaseID        string `json:"base_id"`
			DrainTime     string `json:"drain_time"`
			DrainStrategy string `json:"drain_strategy"`
			Mode          string `json:"mode"`
			ServiceNode   string `json:"service_node"`
		} `json:"command_line_options"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
		UptimeCurrentEpoch string `json:"uptime_current_epoch"`
	}
	if err := json.Unmarshal([]byte(info), &si); err != nil {
		t.Fatalf("server_info: %v\n%s", err, info)
	}
	c := si.CommandLineOptions
	if si.State != "LIVE" || c.RestartEpoch != 2 || c.BaseID != "9" || c.DrainTime != "30s" || c.DrainStrategy != "Immediate" ||
		c.Mode != "Serve" || si.Node.ID != "override" || si.UptimeCurrentEpoch == "" || si.HotRestartVersion != "disabled" {
		t.Errorf("server_info = %+v\n%s", si, info)
	}
	_, st := adminGet(t, srv, "/stats?filter=^server\\.")
	for _, want := range []string{"server.hot_restart_epoch: 2\n", "server.live: 1\n", "server.state: 0\n", "server.uptime: "} {
		if !strings.Contains(st, want) {
			t.Errorf("/stats lacks %q:\n%s", want, st)
		}
	}
	_, clusters := adminGet(t, srv, "/clusters")
	if !strings.Contains(clusters, "static::observability_name::static\n") || !strings.Contains(clusters, "static::added_via_api::false\n") {
		t.Errorf("/clusters:\n%s", clusters)
	}

	inAddr, _ := srv.ListenerAddr("inbound")
	outAddr, _ := srv.ListenerAddr("outbound")
	if _, ls := adminGet(t, srv, "/listeners"); ls != "inbound::"+inAddr.String()+"\noutbound::"+outAddr.String()+"\n" {
		t.Errorf("/listeners = %q, want each listener with its bound address", ls)
	}
	var cj struct {
		ClusterStatuses []struct {
			Name            string `json:"name"`
			AddedViaAPI     bool   `json:"added_via_api"`
			CircuitBreakers struct {
				Thresholds []struct {
					Priority       string `json:"priority"`
					MaxConnections int    `json:"max_connections"`
				} `json:"thresholds"`
			} `json:"circuit_breakers"`
		} `json:"cluster_statuses"`
	}
	if _, body := adminGet(t, srv, "/clusters?format=json"); json.Unmarshal([]byte(body), &cj) != nil || len(cj.ClusterStatuses) != 1 ||
		cj.ClusterStatuses[0].Name != "static" || cj.ClusterStatuses[0].AddedViaAPI ||
		len(cj.ClusterStatuses[0].CircuitBreakers.Thresholds) != 2 || cj.ClusterStatuses[0].CircuitBreakers.Thresholds[0].MaxConnections != 1024 ||
		cj.ClusterStatuses[0].CircuitBreakers.Thresholds[1].Priority != "HIGH" {
		t.Errorf("/clusters?format=json = %+v\n%s", cj, body)
	}

	if code, _ := adminPost(t, srv, "/healthcheck/fail"); code != 200 {
		t.Fatal("healthcheck/fail failed")
	}
	if code, body := adminGet(t, srv, "/ready"); code != 503 || body != "DRAINING\n" {
		t.Errorf("/ready after healthcheck/fail = %d %q, want 503 DRAINING", code, body)
	}
	if !strings.Contains(func() string { _, s := adminGet(t, srv, "/stats"); return s }(), "server.live: 0\n") {
		t.Error("server.live must be 0 after healthcheck/fail")
	}
	adminPost(t, srv, "/healthcheck/ok")

	in, _ := srv.ListenerAddr("inbound")
	out, _ := srv.ListenerAddr("outbound")
	if code, _ := adminPost(t, srv, "/drain_listeners?inboundonly"); code != 200 {
		t.Fatal("drain_listeners failed")
	}
	eventually(t, "inbound listener closed", func() bool {
		c, err := net.DialTimeout("tcp", in.String(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if conn, err := net.Dial("tcp", out.String()); err != nil {
		t.Errorf("outbound listener must stay open after drain_listeners?inboundonly: %v", err)
	} else {
		conn.Close()
	}

	admin := srv.AdminAddr().String()
	if code, body := adminPost(t, srv, "/quitquitquit"); code != 200 || body != "OK\n" {
		t.Errorf("quitquitquit = %d %q", code, body)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after /quitquitquit")
	}
	if _, err := http.Get("http://" + admin + "/ready"); err == nil {
		t.Error("admin listener still open after exit")
	}
	if _, err := net.Dial("tcp", out.String()); err == nil {
		t.Error("listener still open after exit")
	}
}
