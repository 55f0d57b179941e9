package web

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
)

const testToken = "s3cret-token"

// dashFake is a backend for every dashboard feature, answering from fixed data.
type dashFake struct {
	fakeBackend
	events  []api.Event
	live    chan api.Event
	traffic []api.TrafficRequest
}

func (f *dashFake) Subscribe(after uint64, _ int) ([]api.Event, <-chan api.Event, func()) {
	var h []api.Event
	for _, e := range f.events {
		if e.Seq > after {
			h = append(h, e)
		}
	}
	return h, f.live, func() {}
}

func (f *dashFake) Topology(context.Context) (api.Topology, error) {
	return api.Topology{
		Services: []api.TopologyService{{Name: "backend", Namespace: "default", Hostname: "backend.default.svc.cluster.local", Pods: []string{"backend-v1"}}},
		Pods:     []api.TopologyPod{{Name: "frontend-v1", Ready: true}, {Name: "backend-v1", Ready: true, RBACDenied: 3}},
		Edges: []api.TopologyEdge{{From: "frontend-v1", To: "backend.default.svc.cluster.local", Requests: 10, RPS: 2.5,
			MTLS: true, Handshakes: 1, MTLSEndpoints: 2, Denied: 3}},
	}, nil
}

func (f *dashFake) WatchTopology(ctx context.Context) <-chan api.Topology {
	ch := make(chan api.Topology)
	go func() {
		defer close(ch)
		for i := 0; ; i++ {
			t, _ := f.Topology(ctx)
			t.Edges[0].Requests = uint64(i)
			select {
			case ch <- t:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

func (f *dashFake) InspectPod(_ context.Context, pod string, lines int) (api.PodInspection, error) {
	if pod != "backend-v1" {
		return api.PodInspection{}, api.ErrUnknownPod
	}
	return api.PodInspection{
		Pod:     pod,
		Agent:   &agentapi.Status{Pod: pod, Ready: true, Epochs: []agentapi.EpochStatus{{Epoch: 0, PID: 10, State: agentapi.EpochLive}}},
		Capture: "[3:180] -A ISTIO_OUTPUT -m comment --comment \"why\" -j RETURN\n",
		XDS:     []api.XDSTypeState{{TypeURL: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Sent: "v1", Acked: "v1", Synced: true}},
		Logs:    map[string][]string{"proxy": make([]string, lines)},
	}, nil
}

func (f *dashFake) SendTraffic(_ context.Context, r api.TrafficRequest) (api.TrafficResult, error) {
	f.traffic = append(f.traffic, r)
	if r.URL == "http://nowhere/" {
		return api.TrafficResult{}, api.ErrBadTraffic
	}
	return api.TrafficResult{Sent: r.N, Statuses: map[string]int{"200": r.N}, Pods: map[string]int{"backend-v1": r.N}, P50Ms: 1}, nil
}

func newDashFake() *dashFake {
	return &dashFake{
		events: []api.Event{{Seq: 1, Kind: "pod.created", Pod: "backend-v1", Message: "one"}, {Seq: 2, Kind: "pod.ready", Pod: "backend-v1", Message: "two"}},
		live:   make(chan api.Event, 4),
	}
}

// dashServer serves the dashboard like the lab does on TCP: API with every feature,
// behind the guard, on the httptest listener's own address.
func dashServer(t *testing.T, f *dashFake) (*httptest.Server, Guard) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	g := Guard{Token: testToken, Addr: srv.Listener.Addr().String()}
	api := NewHandler(f, testutil.Logger(t), EventRoutes(f), TopologyRoutes(f), InspectRoutes(f), TrafficRoutes(f))
	srv.Config.Handler = Dashboard(api, g)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, g
}

// authed returns a client logged in through the login URL, as a browser is.
func authed(t *testing.T, srv *httptest.Server, g Guard) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	c.Jar = jar
	resp, err := c.Get(g.LoginURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Fatalf("login: status %d at %s; want 200 at the URL without the token", resp.StatusCode, resp.Request.URL)
	}
	return c
}

func do(t *testing.T, c *http.Client, method, url, origin, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLoginSetsStrictHttpOnlyCookie(t *testing.T) {
	srv, g := dashServer(t, newDashFake())
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(g.LoginURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login answered %d to %q; want 303 to / (the token leaves the address bar)", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies = %v", cookies)
	}
	ck := cookies[0]
	if ck.Name != SessionCookiePrefix+port(g.Addr) || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge != int(DefaultSessionTTL.Seconds()) {
		t.Errorf("cookie = %+v; want %s, HttpOnly, SameSite=Strict, Path=/, Max-Age %v", ck, SessionCookiePrefix+port(g.Addr), DefaultSessionTTL)
	}
	if ck.Value == testToken || len(ck.Value) != 64 {
		t.Errorf("cookie value %q: want a 32-byte random session id, never the login token", ck.Value)
	}
	// A wrong token logs nobody in.
	resp, err = c.Get(g.Origin() + "/?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: status %d, cookies %v; want 401 and none", resp.StatusCode, resp.Cookies())
	}
}

func TestSecurityRefusals(t *testing.T) {
	srv, g := dashServer(t, newDashFake())
	c := authed(t, srv, g)
	anon := &http.Client{Transport: srv.Client().Transport} // no cookie jar
	trafficBody := `{"pod":"frontend-v1","url":"http://backend:8080/","n":1}`
	tests := []struct {
		name               string
		client             *http.Client
		method, path, host string
		origin, body       string
		bearer             string
		want               int
	}{
		{name: "no token, page", client: anon, method: "GET", path: "/", want: 401},
		{name: "no token, API", client: anon, method: "GET", path: "/v1/pods", want: 401},
		{name: "no token, events", client: anon, method: "GET", path: "/v1/events", want: 401},
		{name: "wrong cookie", client: anon, method: "GET", path: "/v1/lab", bearer: "nope", want: 401},
		{name: "bearer token", client: anon, method: "GET", path: "/v1/lab", bearer: testToken, want: 200},
		{name: "rebinding host", client: c, method: "GET", path: "/v1/pods", host: "evil.example:80", want: 403},
		{name: "rebinding host with token", client: anon, method: "GET", path: "/?token=" + testToken, host: "evil.example", want: 403},
		{name: "rebinding host, right port", client: c, method: "GET", path: "/v1/lab", host: "attacker.test:" + port(g.Addr), want: 403},
		{name: "post without origin", client: c, method: "POST", path: "/v1/traffic", body: trafficBody, want: 403},
		{name: "post from another origin", client: c, method: "POST", path: "/v1/traffic", origin: "http://evil.example", body: trafficBody, want: 403},
		{name: "post from a sibling port", client: c, method: "POST", path: "/v1/traffic", origin: "http://127.0.0.1:1", body: trafficBody, want: 403},
		{name: "post from own origin", client: c, method: "POST", path: "/v1/traffic", origin: g.Origin(), body: trafficBody, want: 200},
		{name: "post from own origin as localhost", client: anon, bearer: testToken, method: "POST", path: "/v1/traffic", host: "localhost:" + port(g.Addr), origin: "http://localhost:" + port(g.Addr), body: trafficBody, want: 200},
		{name: "page with cookie", client: c, method: "GET", path: "/", want: 200},
		{name: "asset", client: c, method: "GET", path: "/app.js", want: 200},
		{name: "no such asset", client: c, method: "GET", path: "/nope.js", want: 404},
		{name: "post to a page", client: c, method: "POST", path: "/", origin: g.Origin(), want: 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s (Host %q, Origin %q): status %d, want %d", tc.method, tc.path, tc.host, tc.origin, resp.StatusCode, tc.want)
			}
		})
	}
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

func TestPageIsSelfContained(t *testing.T) {
	srv, g := dashServer(t, newDashFake())
	c := authed(t, srv, g)
	status, body := do(t, c, "GET", srv.URL+"/", "", "")
	if status != 200 || !strings.Contains(body, `<script src="/app.js"`) {
		t.Fatalf("index: %d\n%s", status, body)
	}
	for _, asset := range []string{"/", "/app.js", "/style.css"} {
		_, b := do(t, c, "GET", srv.URL+asset, "", "")
		for _, bad := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "url(http", "url(//", "@import", `fetch("http`, "EventSource(\"http"} {
			if i := strings.Index(b, bad); i >= 0 {
				t.Errorf("%s refers to %q: every asset must be embedded", asset, b[i:min(i+40, len(b))])
			}
		}
	}
	resp, err := c.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

func TestEventsStreamHistoryThenLive(t *testing.T) {
	f := newDashFake()
	srv, g := dashServer(t, f)
	c := authed(t, srv, g)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events", nil)
	req.Header.Set("Last-Event-ID", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	f.live <- api.Event{Seq: 3, Kind: "epoch.state", Message: "three"}
	got := readSSE(t, resp.Body, 2)
	if !strings.Contains(got[0], "id: 2\n") || !strings.Contains(got[0], `"message":"two"`) {
		t.Errorf("first event = %q; want history after Last-Event-ID 1, i.e. seq 2", got[0])
	}
	if !strings.Contains(got[1], "id: 3\n") || !strings.Contains(got[1], `"kind":"epoch.state"`) {
		t.Errorf("second event = %q; want the live one", got[1])
	}
	status, _ := do(t, c, "GET", srv.URL+"/v1/events?after=x", "", "")
	if status != 400 {
		t.Errorf("?after=x: status %d, want 400", status)
	}
}

// readSSE reads n events ("...\n\n" blocks) from an event stream.
func readSSE(t *testing.T, r io.Reader, n int) []string {
	t.Helper()
	var out []string
	var buf strings.Builder
	b := make([]byte, 1)
	for len(out) < n {
		if _, err := r.Read(b); err != nil {
			t.Fatalf("read event stream after %d events: %v (partial %q)", len(out), err, buf.String())
		}
		buf.WriteByte(b[0])
		if strings.HasSuffix(buf.String(), "\n\n") {
			out = append(out, buf.String())
			buf.Reset()
		}
	}
	return out
}

func TestTopologyEndpoints(t *testing.T) {
	srv, g := dashServer(t, newDashFake())
	c := authed(t, srv, g)
	status, body := do(t, c, "GET", srv.URL+"/v1/topology", "", "")
	if status != 200 || !strings.Contains(body, `"from":"frontend-v1"`) || !strings.Contains(body, `"rps":2.5`) {
		t.Fatalf("topology: %d %s", status, body)
	}
	for _, want := range []string{`"mtls":true`, `"handshakes":1`, `"mtlsEndpoints":2`, `"plaintextEndpoints":0`, `"denied":3`, `"rbacDenied":3`} {
		if !strings.Contains(body, want) {
			t.Errorf("topology lacks %s: %s", want, body)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/topology/stream", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := readSSE(t, resp.Body, 2)
	if !strings.Contains(got[0], `"requests":0`) || !strings.Contains(got[1], `"requests":1`) {
		t.Errorf("stream = %q; want successive snapshots", got)
	}
}

func TestInspectEndpoint(t *testing.T) {
	srv, g := dashServer(t, newDashFake())
	c := authed(t, srv, g)
	status, body := do(t, c, "GET", srv.URL+"/v1/pods/backend-v1/inspect?lines=3", "", "")
	if status != 200 || !strings.Contains(body, `"state":"live"`) || !strings.Contains(body, `ISTIO_OUTPUT`) || !strings.Contains(body, `"synced":true`) {
		t.Fatalf("inspect: %d %s", status, body)
	}
	if !strings.Contains(body, `"proxy":["","",""]`) {
		t.Errorf("inspect did not pass lines=3: %s", body)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/v1/pods/nope/inspect", 404},
		{"/v1/pods/backend-v1/inspect?lines=x", 400},
		{"/v1/pods/backend-v1/inspect?lines=100000", 400},
	} {
		if status, _ := do(t, c, "GET", srv.URL+tc.path, "", ""); status != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, status, tc.want)
		}
	}
}

func TestTrafficEndpoint(t *testing.T) {
	f := newDashFake()
	srv, g := dashServer(t, f)
	c := authed(t, srv, g)
	status, body := do(t, c, "POST", srv.URL+"/v1/traffic", g.Origin(), `{"pod":"frontend-v1","url":"http://backend:8080/","n":20}`)
	if status != 200 || !strings.Contains(body, `"backend-v1":20`) || !strings.Contains(body, `"200":20`) {
		t.Fatalf("traffic: %d %s", status, body)
	}
	for _, tc := range []struct {
		name, body string
	}{
		{"not JSON", `pod=x`},
		{"no pod", `{"url":"http://backend/","n":1}`},
		{"zero requests", `{"pod":"a","url":"http://backend/","n":0}`},
		{"too many", `{"pod":"a","url":"http://backend/","n":100000}`},
		{"not http", `{"pod":"a","url":"file:///etc/shadow","n":1}`},
		{"command in url", `{"pod":"a","url":"sh -c id","n":1}`},
		{"credentials", `{"pod":"a","url":"http://u:p@backend/","n":1}`},
		{"backend refuses", `{"pod":"a","url":"http://nowhere/","n":1}`},
	} {
		if status, body := do(t, c, "POST", srv.URL+"/v1/traffic", g.Origin(), tc.body); status != 400 {
			t.Errorf("%s: status %d (%s), want 400", tc.name, status, body)
		}
	}
	if len(f.traffic) != 2 {
		t.Errorf("backend saw %d requests; invalid ones must be refused before it", len(f.traffic))
	}
}

func TestGuardHostAllowed(t *testing.T) {
	g := Guard{Token: "x", Addr: "127.0.0.1:15080"}
	for host, want := range map[string]bool{
		"127.0.0.1:15080": true, "localhost:15080": true, "LOCALHOST:15080": true,
		"127.0.0.1:15081": false, "localhost:1": false, "127.0.0.1": false, "evil.example:15080": false, "": false,
	} {
		if got := g.hostAllowed(host); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	remote := Guard{Token: "x", Addr: "192.168.1.5:15080"}
	if remote.hostAllowed("localhost:15080") {
		t.Error("localhost is allowed for a non-loopback listen address")
	}
	if u, _ := url.Parse(g.LoginURL()); u.Query().Get(TokenParam) != "x" || u.Host != g.Addr {
		t.Errorf("LoginURL = %s", g.LoginURL())
	}
}
