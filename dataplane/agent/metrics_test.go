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
	status := httptest.NewServer(newMergedMetrics(admin, slog.New(slog.DiscardHandler)))
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
