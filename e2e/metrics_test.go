package e2e

import (
	"context"
	"net"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrapeMetrics GETs /metrics from the lab API socket and parses it with Prometheus' own
// text parser, as a scraper would.
func scrapeMetrics(tb testing.TB, sock string) map[string]*dto.MetricFamily {
	tb.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://lab/metrics")
	if err != nil {
		tb.Fatalf("scrape /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("scrape /metrics: %s", resp.Status)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// matches reports whether m carries every label of want.
func matches(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
			found++
		}
	}
	return found == len(want)
}

// counterValue sums the counters of f whose labels include want.
func counterValue(f *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		if matches(m, want) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// gaugeValue sums the gauges of f whose labels include want.
func gaugeValue(f *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		if matches(m, want) {
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}
