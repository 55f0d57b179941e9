package agent

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The status port's /stats/prometheus merges the agent's metrics and the proxy's, as
// pilot-agent's: agent first, then the proxy's text as its admin API wrote it (the
// query passed on); a proxy that does not answer is left out and counted.
func TestMergedMetrics(t *testing.T) {
	t.Parallel()
	var gotQuery string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats/prometheus" {
			http.NotFound(w, r)
			return
		}
		gotQuery = r.URL.RawQuery
		_, _ = io.WriteString(w, "# TYPE istio_requests_total counter\nistio_requests_total{reporter=\"destination\",response_code=\"200\"} 3\n")
	}))
	defer proxy.Close()
	admin := adminClient{base: proxy.URL, client: proxy.Client()}
	status := httptest.NewServer(newMergedMetrics(admin, "", slog.New(slog.DiscardHandler)))
	defer status.Close()

	body := get(t, status.URL+"/stats/prometheus?usedonly")
	agentAt, proxyAt := strings.Index(body, "istio_agent_scrapes_total 1"), strings.Index(body, `istio_requests_total{reporter="destination",response_code="200"} 3`)
	if agentAt < 0 || proxyAt < 0 || agentAt > proxyAt {
		t.Fatalf("merged metrics: agent at %d, proxy at %d:\n%s", agentAt, proxyAt, body)
	}
	if gotQuery != "usedonly" {
		t.Errorf("query to the proxy = %q, want usedonly", gotQuery)
	}
	if !strings.Contains(body, "istio_agent_go_goroutines") {
		t.Error("no agent runtime metrics")
	}

	proxy.Close()
	body = get(t, status.URL+"/stats/prometheus")
	if strings.Contains(body, "istio_requests_total") || !strings.Contains(body, `istio_agent_scrape_failures_total{type="envoy"} 1`) {
		t.Fatalf("proxy down:\n%s", body)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // test
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return string(b)
}

// An app whose prometheus.io annotations name its metrics is scraped too and written last,
// as pilot-agent does; an app that does not answer is left out and counted.
func TestMergedMetricsWithApp(t *testing.T) {
	t.Parallel()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE envoy_server_live gauge\nenvoy_server_live 1") // no final newline
	}))
	defer proxy.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/custom/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "# TYPE orders_total counter\norders_total 7\n")
	}))
	defer app.Close()
	admin := adminClient{base: proxy.URL, client: proxy.Client()}
	status := httptest.NewServer(newMergedMetrics(admin, app.URL+"/custom/metrics", slog.New(slog.DiscardHandler)))
	defer status.Close()

	body := get(t, status.URL+"/stats/prometheus")
	envoyAt, appAt := strings.Index(body, "envoy_server_live 1\n"), strings.Index(body, "orders_total 7")
	if envoyAt < 0 || appAt < 0 || appAt < envoyAt {
		t.Fatalf("merged metrics: proxy at %d, app at %d (want the app last, on its own line):\n%s", envoyAt, appAt, body)
	}

	app.Close()
	body = get(t, status.URL+"/stats/prometheus")
	if strings.Contains(body, "orders_total") || !strings.Contains(body, `istio_agent_scrape_failures_total{type="application"} 1`) {
		t.Fatalf("app down:\n%s", body)
	}
}

func TestAppMetricsURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		port uint16
		path string
		want string
	}{{0, "/metrics", ""}, {9090, "", "http://127.0.0.1:9090/metrics"}, {8080, "/stats", "http://127.0.0.1:8080/stats"}} {
		if got := appMetricsURL(tc.port, tc.path); got != tc.want {
			t.Errorf("appMetricsURL(%d, %q) = %q, want %q", tc.port, tc.path, got, tc.want)
		}
	}
}
