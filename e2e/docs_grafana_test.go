package e2e

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsGrafanaDashboardTask walks "Visualizing Metrics with Grafana"
// (tasks/observability/metrics/using-istio-dashboard): Bookinfo behind its gateway,
// samples/addons/prometheus.yaml and grafana.yaml, the page's `kubectl -n istio-system
// get svc prometheus` and `get svc grafana`, `istioctl dashboard grafana`, then what the
// reader's browser asks Grafana for the Istio Service Dashboard: the dashboard found by
// /api/search, its JSON by uid, and its Client Request Volume panel's PromQL (template
// variables filled as the dashboard's defaults and the page's productpage service) through
// Grafana's data source proxy, answered by the lab's Prometheus with the traffic the
// page's curl loop sends.
func TestDocsGrafanaDashboardTask(t *testing.T) {
	testutil.RequireRoot(t)
	requirePrometheus(t)
	t.Parallel()
	p := startPageLab(t)
	gw := p.bookinfoBehindGateway()
	p.sh(`kubectl apply -f samples/addons/prometheus.yaml
kubectl apply -f samples/addons/grafana.yaml`)
	for name, port := range map[string]string{"prometheus": "9090/TCP", "grafana": "3000/TCP"} {
		out := p.sh(`kubectl -n istio-system get svc ` + name)
		if !regexp.MustCompile(`^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\n` + name + `\s+ClusterIP\s+\d+\.\d+\.\d+\.\d+\s+<none>\s+` + regexp.QuoteMeta(port) + `\s+\S+\n$`).MatchString(out) {
			t.Errorf("kubectl -n istio-system get svc %s:\n%s", name, out)
		}
	}
	grafana := p.addonDashboard("grafana", `^http://localhost:\d+\n$`)
	var found []struct {
		UID, Title, URL string
	}
	p.until("Grafana's /api/search finds the Istio Service Dashboard", func() string {
		out, _ := getBody(grafana + "/api/search?query=Istio%20Service%20Dashboard")
		return out
	}, func(out string) bool {
		return json.Unmarshal([]byte(out), &found) == nil && len(found) == 1 && found[0].Title == "Istio Service Dashboard"
	})
	var dash struct {
		Dashboard struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		} `json:"dashboard"`
	}
	if err := json.Unmarshal([]byte(getOK(t, grafana+"/api/dashboards/uid/"+found[0].UID)), &dash); err != nil {
		t.Fatal(err)
	}
	expr := ""
	for _, panel := range dash.Dashboard.Panels {
		if panel.Title == "Client Request Volume" && len(panel.Targets) > 0 {
			expr = panel.Targets[0].Expr
		}
	}
	if !strings.Contains(expr, "istio_requests_total") {
		t.Fatalf("the Istio Service Dashboard has no Client Request Volume query: %q", expr)
	}
	// The browser fills the dashboard's variables: the reporter's default (destination),
	// the page's service, and Grafana's $__rate_interval (four scrape intervals).
	query := strings.NewReplacer(`$qrep`, "destination", `$service`, "productpage.default.svc.cluster.local", `$__rate_interval`, "1m").Replace(expr)
	p.step("the Istio Service Dashboard's Client Request Volume: " + query)

	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		// The page's traffic: for i in $(seq 1 100); do curl -s -o /dev/null "http://$GATEWAY_URL/productpage"; done
		for range 10 {
			_, _ = p.outside("curl", "-s", "-o", "/dev/null", "http://"+gw+"/productpage")
		}
		last, _ = getBody(grafana + "/api/datasources/proxy/uid/prometheus/api/v1/query?query=" + url.QueryEscape(query))
		var res struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(last), &res) == nil && res.Status == "success" && len(res.Data.Result) == 1 {
			if s, ok := res.Data.Result[0].Value[1].(string); ok {
				if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
					p.step("Grafana's data source proxy: " + s + " requests/s to productpage")
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Client Request Volume query through Grafana never counted the traffic; last answer:\n%s", last)
		}
		time.Sleep(3 * time.Second)
	}
}
