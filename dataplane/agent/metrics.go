package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// mergedMetrics is pilot-agent's merged metrics endpoint, GET /stats/prometheus on the
// status port (15020), which Istio's prometheus.io annotations point scrapers at: the
// agent's own metrics (istio_agent_*: Go runtime, process, scrapes), then the proxy's
// /stats/prometheus (Envoy's metrics and Istio's standard istio_* metrics), in the
// Prometheus text format, then the app's own metrics when the pod's prometheus.io
// annotations name them (last, as pilot-agent writes them: an OpenMetrics "# EOF" there
// would end the exposition). A proxy or app that cannot be scraped counts as
// istio_agent_scrape_failures_total{type="envoy"|"application"} and leaves its part out,
// as pilot-agent does. It is safe for concurrent use.
type mergedMetrics struct {
	admin    adminClient
	appURL   string // the app's metrics, "" for none
	app      *http.Client
	reg      *prometheus.Registry
	scrapes  prometheus.Counter
	failures *prometheus.CounterVec
	log      *slog.Logger
}

// appMetricsMaxBytes bounds what the app's metrics may add to one scrape.
const appMetricsMaxBytes = 16 << 20

// appMetricsURL is where pilot-agent scrapes an app's metrics: localhost, the annotated
// port and path ("/metrics" when the path is not annotated); "" when no port is.
func appMetricsURL(port uint16, path string) string {
	if port == 0 {
		return ""
	}
	if path == "" {
		path = "/metrics"
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, path)
}

func newMergedMetrics(admin adminClient, appURL string, log *slog.Logger) *mergedMetrics {
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWithPrefix("istio_agent_", reg)
	m := &mergedMetrics{admin: admin, appURL: appURL, app: &http.Client{Timeout: adminTimeout}, reg: reg, log: log,
		scrapes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "scrapes_total", Help: "The total number of scrapes."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "scrape_failures_total", Help: "The total number of failed scrapes."}, []string{"type"}),
	}
	wrapped.MustRegister(m.scrapes, m.failures, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *mergedMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.scrapes.Inc()
	path := "/stats/prometheus"
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery // pilot-agent passes the query on (e.g. ?usedonly)
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	code, envoy, err := m.admin.do(ctx, http.MethodGet, path)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("proxy answered %d %s", code, http.StatusText(code))
	}
	if err != nil {
		m.log.Warn("scrape proxy metrics", "err", err)
		m.failures.WithLabelValues("envoy").Inc()
		envoy = nil
	}
	app := m.scrapeApp(ctx)
	// As pilot-agent: the proxy and the app are scraped first, so a failure counts in
	// this answer.
	var agent bytes.Buffer
	if err := m.writeAgent(&agent); err != nil {
		m.log.Error("write agent metrics", "err", err)
		m.failures.WithLabelValues("agent").Inc()
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	_, _ = w.Write(agent.Bytes())
	_, _ = w.Write(envoy)
	if len(envoy) > 0 && len(app) > 0 && !bytes.HasSuffix(envoy, []byte("\n")) {
		_, _ = w.Write([]byte("\n"))
	}
	_, _ = w.Write(app)
}

// scrapeApp GETs the app's metrics in the text format; nil (and a counted failure) when
// they cannot be had.
func (m *mergedMetrics) scrapeApp(ctx context.Context) []byte {
	if m.appURL == "" {
		return nil
	}
	body, err := func() ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.appURL, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		resp, err := m.app.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("app answered %s", resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, appMetricsMaxBytes+1))
		if err == nil && len(b) > appMetricsMaxBytes {
			err = fmt.Errorf("the app's metrics are over %d bytes", appMetricsMaxBytes)
		}
		return b, err
	}()
	if err != nil {
		m.log.Warn("scrape app metrics", "url", m.appURL, "err", err)
		m.failures.WithLabelValues("application").Inc()
		return nil
	}
	return body
}

func (m *mergedMetrics) writeAgent(b *bytes.Buffer) error {
	mfs, err := m.reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

// localhostOnly is pilot-agent's METRICS_LOCALHOST_ACCESS_ONLY on the status port's
// metrics: a request from any address but the loopback is refused with 403 and its
// message. The secure merged metrics listener reaches the agent from the proxy, over
// the loopback, so it still serves them.
func localhostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip, perr := netip.ParseAddr(host); err != nil || perr != nil || !ip.Unmap().IsLoopback() {
			http.Error(w, "Only requests from localhost are allowed", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
