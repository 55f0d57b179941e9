package trace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

const istioLine = `[2026-01-02T03:04:05.678Z] "GET / HTTP/1.1" 200 - via_upstream - "-" 0 81 12 7 "-" "meshlab-trace" "meshlab-trace-abc" "backend:8080" "10.244.0.4:8080" outbound|8080||backend.default.svc.cluster.local 10.244.0.3:41000 10.96.0.10:8080 10.244.0.3:40000 - all-to-backend`

func TestParseAccessLogLineText(t *testing.T) {
	e := parseAccessLogLine(istioLine)
	if e.ResponseCode != 200 || e.ResponseFlags != "" || e.DurationMs == nil || *e.DurationMs != 12 || e.UpstreamServiceTimeMs == nil || *e.UpstreamServiceTimeMs != 7 ||
		e.UpstreamHost != "10.244.0.4:8080" || e.UpstreamCluster != "outbound|8080||backend.default.svc.cluster.local" || e.RouteName != "all-to-backend" {
		t.Errorf("entry %+v", e)
	}
	flagged := strings.Replace(istioLine, "200 - via_upstream", "503 UF,URX upstream_reset_before_response_started", 1)
	if e := parseAccessLogLine(flagged); e.ResponseCode != 503 || e.ResponseFlags != "UF,URX" {
		t.Errorf("flagged entry %+v", e)
	}
}

func TestParseAccessLogLineJSON(t *testing.T) {
	e := parseAccessLogLine(`{"duration":3,"request_id":"x","response_code":200,"response_flags":"-","route_name":"default","upstream_cluster":"inbound|8080||","upstream_host":"10.244.0.4:8080","upstream_service_time":null}`)
	if e.ResponseCode != 200 || e.ResponseFlags != "" || e.DurationMs == nil || *e.DurationMs != 3 || e.UpstreamServiceTimeMs != nil ||
		e.UpstreamCluster != "inbound|8080||" || e.RouteName != "default" || e.UpstreamHost != "10.244.0.4:8080" {
		t.Errorf("entry %+v", e)
	}
}

func TestParseAccessLogLineOtherFormat(t *testing.T) {
	if e := parseAccessLogLine("200 x-id"); e.Raw != "200 x-id" || e.ResponseCode != 0 || e.RouteName != "" {
		t.Errorf("entry %+v; want only Raw", e)
	}
}

func TestFindAccessLogWaitsForTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	if err := os.WriteFile(path, []byte("starting\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan accessLogEntry, 1)
	go func() {
		e, _ := findAccessLog(t.Context(), path, "meshlab-trace-abc")
		done <- e
	}()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(istioLine + "\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-done:
		if e.RouteName != "all-to-backend" {
			t.Errorf("found %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("findAccessLog did not return")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, ok := findAccessLog(ctx, path, "absent-id"); ok {
		t.Error("found a line for an id that is not in the log")
	}
}

func TestApplyAccessLogPrefersTheProxysAccount(t *testing.T) {
	var d proxyDump
	h := api.TraceHop{Cluster: &api.TraceResource{Name: "outbound|8080||other"}, Endpoint: "1.2.3.4:8080"}
	e := parseAccessLogLine(istioLine)
	applyAccessLog(&h, &e, d, nil, true)
	if h.AccessLog != istioLine || h.Cluster.Name != "outbound|8080||backend.default.svc.cluster.local" || h.Route == nil || h.Route.Name != "all-to-backend" ||
		h.Endpoint != "10.244.0.4:8080" || h.DurationMs == nil || *h.DurationMs != 12 {
		t.Errorf("hop %+v", h)
	}
	applyAccessLog(&h, nil, d, nil, true) // no line: unchanged
	if h.AccessLog != istioLine {
		t.Errorf("hop changed without a line: %+v", h)
	}
}

func TestApplyAccessLogRouteOriginFromTheChainsRoutes(t *testing.T) {
	var rcs []dumpRouteConfig
	const js = `[{"name":"8080","virtual_hosts":[{"name":"b","routes":[{"name":"all-to-backend","metadata":{"filter_metadata":{"istio":{"config":"/apis/x/virtual-service/backend"}}}}]}]}]`
	if err := json.Unmarshal([]byte(js), &rcs); err != nil {
		t.Fatal(err)
	}
	var h api.TraceHop
	e := parseAccessLogLine(istioLine)
	applyAccessLog(&h, &e, proxyDump{}, rcs, false)
	if h.Route == nil || h.Route.Origin != "/apis/x/virtual-service/backend" || h.Endpoint != "" {
		t.Errorf("hop %+v route %+v; want the route's origin and no endpoint (inbound)", h, h.Route)
	}
}
