package demoapp

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGrafanaAPI: the persona provisions what grafana.yaml's ConfigMaps hold (a
// Prometheus datasource, a file provider's dashboards with and without a uid) and serves
// them as Grafana's API does; the data source proxy forwards a panel's query to the
// datasource's url.
func TestGrafanaAPI(t *testing.T) {
	var asked string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Path + "?" + r.URL.RawQuery
		_, _ = io.WriteString(w, `{"status":"success"}`)
	}))
	defer prom.Close()
	root := t.TempDir()
	write := func(p, data string) {
		t.Helper()
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/grafana/provisioning/datasources/datasources.yaml", "apiVersion: 1\ndatasources:\n- access: proxy\n  isDefault: true\n  name: Prometheus\n  orgId: 1\n  type: prometheus\n  url: "+prom.URL+"\n")
	write("etc/grafana/provisioning/dashboards/dashboardproviders.yaml", "apiVersion: 1\nproviders:\n- folder: istio\n  name: istio-services\n  options:\n    path: /var/lib/grafana/dashboards/istio-services\n  orgId: 1\n  type: file\n")
	write("var/lib/grafana/dashboards/istio-services/istio-service-dashboard.json", `{"title":"Istio Service Dashboard","panels":[{"title":"Client Request Volume"}]}`)
	write("var/lib/grafana/dashboards/istio-services/istio-mesh-dashboard.json", `{"title":"Istio Mesh Dashboard","uid":"1a9a8ea49444aae205c7737573e894f9","tags":["istio"]}`)
	st, err := readGrafanaProvisioning(root)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(st.handler(slog.New(slog.DiscardHandler)))
	defer srv.Close()
	get := func(p string, into any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		return resp.StatusCode
	}
	var found []map[string]any
	if get("/api/search?query=service", &found); len(found) != 1 || found[0]["title"] != "Istio Service Dashboard" || found[0]["type"] != "dash-db" || found[0]["folderTitle"] != "istio" {
		t.Fatalf("/api/search?query=service = %v", found)
	}
	uid, _ := found[0]["uid"].(string)
	if len(uid) != 14 || found[0]["url"] != "/d/"+uid+"/istio-service-dashboard" {
		t.Errorf("a dashboard without a uid: uid %q url %v", uid, found[0]["url"])
	}
	var all []map[string]any
	if get("/api/search", &all); len(all) != 2 || all[0]["title"] != "Istio Mesh Dashboard" || all[0]["uid"] != "1a9a8ea49444aae205c7737573e894f9" {
		t.Errorf("/api/search = %v, want both, by title", all)
	}
	var d struct {
		Meta      map[string]any `json:"meta"`
		Dashboard map[string]any `json:"dashboard"`
	}
	if code := get("/api/dashboards/uid/"+uid, &d); code != 200 || d.Dashboard["uid"] != uid || d.Meta["provisioned"] != true || d.Meta["provisionedExternalId"] != "istio-service-dashboard.json" {
		t.Errorf("/api/dashboards/uid/%s = %d %v", uid, code, d)
	}
	var msg map[string]string
	if code := get("/api/dashboards/uid/nope", &msg); code != 404 || msg["message"] != "Dashboard not found" {
		t.Errorf("/api/dashboards/uid/nope = %d %v", code, msg)
	}
	var ds []grafanaDatasource
	if get("/api/datasources", &ds); len(ds) != 1 || ds[0].UID != "prometheus" || ds[0].ID != 1 || !ds[0].IsDefault {
		t.Fatalf("/api/datasources = %+v", ds)
	}
	var res map[string]string
	for _, p := range []string{"/api/datasources/proxy/uid/prometheus/api/v1/query?query=up", "/api/datasources/proxy/1/api/v1/query?query=up"} {
		asked = ""
		if code := get(p, &res); code != 200 || res["status"] != "success" || asked != "/api/v1/query?query=up" {
			t.Errorf("GET %s: %d %v, the datasource was asked %q", p, code, res, asked)
		}
	}
	if code := get("/api/datasources/proxy/uid/loki/x", &msg); code != 404 || !strings.Contains(msg["message"], "Data source not found") {
		t.Errorf("unknown datasource: %d %v", code, msg)
	}
}
