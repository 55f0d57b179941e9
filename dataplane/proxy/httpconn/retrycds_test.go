package httpconn

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestRetryTakesTheClusterCDSReplaced holds that a retry is sent to the route's cluster
// as CDS left it, as Envoy's router looks the cluster up again for each retry: the first
// attempt's upstream (a rollout's old pod) answers 503 after a CDS update replaced the
// cluster with one whose host is the new pod, and the retry reaches the new pod. Before,
// every try went to the replaced cluster's hosts: under istiod, a client whose cluster
// changed (new SANs with a trust domain alias) while a request was on its way to the
// deleted httpbin pod waited out three connect timeouts and answered 503 after 30 s. A
// cluster CDS removed in the meantime answers no healthy upstream (UH).
func TestRetryTakesTheClusterCDSReplaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		next       func(newAddr string) []*cluster.Config // the CDS update the first attempt sees
		wantStatus int
		wantBody   string
		wantFlags  string
	}{
		{
			name:       "replaced",
			next:       func(newAddr string) []*cluster.Config { return []*cluster.Config{staticCluster(t, "out", newAddr)} },
			wantStatus: 200, wantBody: "new pod", wantFlags: `" 200 - `,
		},
		{
			name:       "removed",
			next:       func(string) []*cluster.Config { return nil },
			wantStatus: 503, wantBody: BodyNoHealthyUpstream, wantFlags: `" 503 UH `,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := stats.NewStore()
			cm := cluster.NewManager(store)
			t.Cleanup(cm.Close)
			newPod := backend(t, "new pod", nil)
			var oldTries atomic.Int32
			oldPod := backend(t, "", func(w http.ResponseWriter, _ *http.Request) {
				if oldTries.Add(1) == 1 {
					cm.ApplyCDS(tc.next(newPod))
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			cm.ApplyCDS([]*cluster.Config{staticCluster(t, "out", oldPod)})
			logPath := t.TempDir() + "/access.log"
			hcm := &hcmv3.HttpConnectionManager{
				StatPrefix: "lab",
				RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
					VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
						routeTo(prefix("/"), &routev3.RouteAction{
							ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "out"},
							RetryPolicy:      &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)},
						}),
					}}}}},
				HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
				AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{
					TypedConfig: mustAny(t, &filev3.FileAccessLog{Path: logPath})}}},
			}
			cfg, err := Compile(mustAny(t, hcm))
			if err != nil {
				t.Fatal(err)
			}
			l := &lab{addr: serveHCM(t, cfg, Deps{Routes: NewRouteStore(), Clusters: cm, Stats: store, Logger: testutil.Logger(t)}),
				store: store, logPath: logPath, client: &http.Client{}}
			t.Cleanup(l.client.CloseIdleConnections)
			resp, err := l.client.Get("http://" + l.addr + "/ip")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || string(body) != tc.wantBody {
				t.Errorf("got %d %q, want %d %q (the old pod was tried %d times)", resp.StatusCode, body, tc.wantStatus, tc.wantBody, oldTries.Load())
			}
			if n := oldTries.Load(); n != 1 {
				t.Errorf("the replaced cluster's host was tried %d times, want once (the first attempt)", n)
			}
			if lines := l.waitLines(t, 1); !strings.Contains(lines[0], tc.wantFlags) {
				t.Errorf("access log %q, want flags %q", lines[0], tc.wantFlags)
			}
		})
	}
}
