package agent

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// fakeAdmin is an httptest admin API whose /ready and /stats answers a test sets.
type fakeAdmin struct {
	readyCode int
	readyBody string
	stats     string
	requests  []string
}

func (f *fakeAdmin) start(t *testing.T) adminClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
		switch r.URL.Path {
		case "/ready":
			w.WriteHeader(f.readyCode)
			fmt.Fprintln(w, f.readyBody)
		case "/stats":
			fmt.Fprint(w, f.stats)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return adminClient{base: srv.URL, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

func TestReadiness(t *testing.T) {
	const bothUpdated = "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 3\n"
	live := func() (agentapi.EpochStatus, bool, bool) {
		return agentapi.EpochStatus{Epoch: 0, State: agentapi.EpochLive}, false, true
	}
	for _, tc := range []struct {
		name   string
		newest func() (agentapi.EpochStatus, bool, bool)
		admin  fakeAdmin
		down   bool // admin not reachable
		want   string
	}{
		{name: "ready", newest: live, admin: fakeAdmin{readyCode: 200, readyBody: "LIVE", stats: bothUpdated}},
		{name: "no proxy", newest: func() (agentapi.EpochStatus, bool, bool) { return agentapi.EpochStatus{}, false, false },
			want: "no proxy running"},
		{name: "epoch starting", newest: func() (agentapi.EpochStatus, bool, bool) {
			return agentapi.EpochStatus{Epoch: 2, State: agentapi.EpochStarting}, false, true
		},
			want: "proxy epoch 2 is starting"},
		// A hot restart: the live parent serves while the child starts and already owns
		// the admin port, so the admin API is not asked.
		{name: "parent serves during restart", down: true,
			newest: func() (agentapi.EpochStatus, bool, bool) {
				return agentapi.EpochStatus{Epoch: 1, State: agentapi.EpochLive}, true, true
			}},
		{name: "admin down", newest: live, down: true, want: "proxy admin not reachable"},
		{name: "initializing", newest: live, admin: fakeAdmin{readyCode: 503, readyBody: "INITIALIZING", stats: bothUpdated},
			want: "proxy state is INITIALIZING"},
		{name: "no cds yet", newest: live,
			admin: fakeAdmin{readyCode: 200, readyBody: "LIVE", stats: "cluster_manager.cds.update_success: 0\nlistener_manager.lds.update_success: 1\n"},
			want:  "cluster_manager.cds.update_success is 0"},
		{name: "no lds stat at all", newest: live,
			admin: fakeAdmin{readyCode: 200, readyBody: "LIVE", stats: "cluster_manager.cds.update_success: 1\n"},
			want:  "listener_manager.lds.update_success is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := tc.admin.start(t)
			if tc.down {
				admin.base = "http://127.0.0.1:1"
			}
			srv := httptest.NewServer(healthHandler(readiness{serving: tc.newest, admin: admin}))
			t.Cleanup(srv.Close)
			resp, err := srv.Client().Get(srv.URL + "/healthz/ready")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			srv.Client().CloseIdleConnections()
			if tc.want == "" {
				if resp.StatusCode != 200 {
					t.Errorf("status %d %q, want 200", resp.StatusCode, body)
				}
				got := tc.admin.requests
				switch {
				case tc.down:
					if len(got) != 0 {
						t.Errorf("admin requests = %q, want none", got)
					}
				case len(got) != 2 ||
					got[1] != `GET /stats?filter=%5E%28listener_manager%5C.lds%5C.update_success%7Ccluster_manager%5C.cds%5C.update_success%29%24`:
					t.Errorf("admin requests = %q", got)
				}
				return
			}
			if resp.StatusCode != 503 || !strings.Contains(string(body), tc.want) {
				t.Errorf("got %d %q, want 503 with %q", resp.StatusCode, body, tc.want)
			}
		})
	}
}
