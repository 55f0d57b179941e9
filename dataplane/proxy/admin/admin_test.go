package admin

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// fakeBackend records the calls the admin API makes.
type fakeBackend struct {
	state  adminv3.ServerInfo_State
	calls  []string
	store  *stats.Store
	logErr error
}

func (f *fakeBackend) ServerInfo() *adminv3.ServerInfo {
	return &adminv3.ServerInfo{Version: "v", State: f.state, Node: &corev3.Node{Id: "n"}}
}

func (f *fakeBackend) ConfigDump(bool) *adminv3.ConfigDump {
	d, _ := anypb.New(&adminv3.ClustersConfigDump{StaticClusters: []*adminv3.ClustersConfigDump_StaticCluster{{}, {}}})
	return &adminv3.ConfigDump{Configs: []*anypb.Any{d}}
}
func (f *fakeBackend) Stats() *stats.Store       { return f.store }
func (f *fakeBackend) WriteClusters(w io.Writer) { io.WriteString(w, "c::observability_name::c\n") }
func (f *fakeBackend) Quit()                     { f.calls = append(f.calls, "quit") }
func (f *fakeBackend) SetHealthCheckFailed(b bool) {
	f.calls = append(f.calls, "health:"+map[bool]string{true: "fail", false: "ok"}[b])
}
func (f *fakeBackend) DrainListeners(in, g, _ bool) {
	f.calls = append(f.calls, "drain:"+map[bool]string{true: "in", false: "all"}[in]+map[bool]string{true: ":graceful", false: ""}[g])
}
func (f *fakeBackend) Logging(map[string][]string) (string, error) {
	if f.logErr != nil {
		return "", f.logErr
	}
	return "active loggers:\n  main: info\n", nil
}

func (f *fakeBackend) Listeners() *adminv3.Listeners {
	return &adminv3.Listeners{ListenerStatuses: []*adminv3.ListenerStatus{{
		Name: "virtualOutbound",
		LocalAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 15001},
		}}},
	}}}
}

func (f *fakeBackend) Clusters() *adminv3.Clusters {
	return &adminv3.Clusters{ClusterStatuses: []*adminv3.ClusterStatus{{Name: "c", AddedViaApi: true}}}
}

func do(h http.Handler, method, target string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Code, rec.Body.String()
}

func TestAdminEndpointsFollowEnvoy(t *testing.T) {
	f := &fakeBackend{state: adminv3.ServerInfo_PRE_INITIALIZING, store: stats.NewStore()}
	f.store.Named("server").Gauge("live").Set(1)
	h := NewHandler(f)
	for _, tc := range []struct {
		name, method, target string
		code                 int
		body                 string // prefix
	}{
		{"ready before init is 503 with the state", "GET", "/ready", 503, "PRE_INITIALIZING\n"},
		{"POST-only path refuses GET", "GET", "/quitquitquit", 405, "Method GET not allowed, POST required."},
		{"unknown path is 404 with help", "GET", "/nope", 404, "invalid path. admin commands are:\n"},
		{"skip_exit requires graceful", "POST", "/drain_listeners?skip_exit", 400, "skip_exit requires graceful\n"},
		{"drain inbound gracefully", "POST", "/drain_listeners?inboundonly&graceful", 200, "OK\n"},
		{"healthcheck fail", "POST", "/healthcheck/fail", 200, "OK\n"},
		{"quit", "POST", "/quitquitquit", 200, "OK\n"},
		{"stats text", "GET", "/stats", 200, "server.live: 1\n"},
		{"stats bad regex", "GET", "/stats?filter=(", 400, "Invalid re2 regex"},
		{"stats bad histogram_buckets", "GET", "/stats?histogram_buckets=detailed", 400, "usage: /stats?histogram_buckets="},
		{"stats cumulative buckets", "GET", "/stats?histogram_buckets=cumulative", 200, "server.live: 1\n"},
		{"server_info uses proto names", "GET", "/server_info", 200, "{\n \"version\": \"v\",\n \"state\": \"PRE_INITIALIZING\",\n \"hot_restart_version\": \"\",\n \"node\": {\n  \"id\": \"n\","},
		{"config_dump resource selection", "GET", "/config_dump?resource=static_clusters", 200, "{\n \"configs\": [\n  {\n   \"@type\": \"type.googleapis.com/envoy.admin.v3.ClustersConfigDump.StaticCluster\"\n  },"},
		{"clusters", "GET", "/clusters", 200, "c::observability_name::c\n"},
		{"logging", "POST", "/logging?level=debug", 200, "active loggers:\n"},
		{"logging refuses GET", "GET", "/logging?level=debug", 405, "Method GET not allowed, POST required."},
		{"healthcheck/fail refuses GET", "GET", "/healthcheck/fail", 405, "Method GET not allowed, POST required."},
		{"healthcheck/ok refuses GET", "GET", "/healthcheck/ok", 405, "Method GET not allowed, POST required."},
		{"drain_listeners refuses GET", "GET", "/drain_listeners", 405, "Method GET not allowed, POST required."},
		{"healthcheck ok", "POST", "/healthcheck/ok", 200, "OK\n"},
		{"listeners text is name::address", "GET", "/listeners", 200, "virtualOutbound::0.0.0.0:15001\n"},
		{"listeners json is envoy.admin.v3.Listeners", "GET", "/listeners?format=json", 200,
			"{\n \"listener_statuses\": [\n  {\n   \"name\": \"virtualOutbound\",\n   \"local_address\": {\n    \"socket_address\": {\n     \"address\": \"0.0.0.0\",\n     \"port_value\": 15001\n"},
		{"clusters json is envoy.admin.v3.Clusters", "GET", "/clusters?format=json", 200,
			"{\n \"cluster_statuses\": [\n  {\n   \"name\": \"c\",\n   \"added_via_api\": true\n"},
		{"help lists listeners", "GET", "/help", 200, "admin commands are:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(h, tc.method, tc.target)
			if code != tc.code || !strings.HasPrefix(body, tc.body) {
				t.Errorf("%s %s = %d %q, want %d %q...", tc.method, tc.target, code, body, tc.code, tc.body)
			}
		})
	}
	want := []string{"drain:in:graceful", "health:fail", "quit", "health:ok"}
	if strings.Join(f.calls, ",") != strings.Join(want, ",") {
		t.Errorf("backend calls = %v, want %v", f.calls, want)
	}
	f.state = adminv3.ServerInfo_LIVE
	if code, body := do(h, "GET", "/ready"); code != 200 || body != "LIVE\n" {
		t.Errorf("ready when LIVE = %d %q", code, body)
	}
	f.logErr = errors.New("unknown logger")
	if code, _ := do(h, "POST", "/logging?bogus=debug"); code != 400 {
		t.Errorf("bad /logging = %d, want 400", code)
	}
}
