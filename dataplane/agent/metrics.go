package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// mergedMetrics is pilot-agent's merged metrics endpoint, GET /stats/prometheus on the
// status port (15020), which Istio's prometheus.io annotations point scrapers at: the
// agent's own metrics (istio_agent_*: Go runtime, process, scrapes), then the proxy's
// /stats/prometheus (Envoy's metrics and Istio's standard istio_* metrics), in the
// Prometheus text format. A proxy that cannot be scraped counts as
// istio_agent_scrape_failures_total{type="envoy"} and leaves its part out, as
// pilot-agent does. It is safe for concurrent use.
type mergedMetrics struct {
	admin    adminClient
	reg      *prometheus.Registry
	scrapes  prometheus.Counter
	failures *prometheus.CounterVec
	log      *slog.Logger
}

func newMergedMetrics(admin adminClient, log *slog.Logger) *mergedMetrics {
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWithPrefix("istio_agent_", reg)
	m := &mergedMetrics{admin: admin, reg: reg, log: log,
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
	// As pilot-agent: the proxy is scraped first, so a failure counts in this answer.
	var agent bytes.Buffer
	if err := m.writeAgent(&agent); err != nil {
		m.log.Error("write agent metrics", "err", err)
		m.failures.WithLabelValues("agent").Inc()
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	_, _ = w.Write(agent.Bytes())
	_, _ = w.Write(envoy)
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
