package metrics

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Families parses a ztunnel's /stats/prometheus (OpenMetrics text) into metric families
// named as Prometheus text and the sidecars' Envoy stats name them: a counter family
// takes its samples' name (istio_tcp_connections_opened_total), so the lab can merge
// ztunnel's series with the sidecars' by family name and type. Families without samples
// are left out.
func Families(r io.Reader) (map[string]*dto.MetricFamily, error) {
	var b strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	counters := map[string]bool{}
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		if line == "# EOF" {
			break
		}
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && f[3] == "counter" {
			counters[f[2]] = true
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ztunnel metrics: %w", err)
	}
	for _, line := range lines {
		if f := strings.SplitN(line, " ", 4); len(f) >= 3 && f[0] == "#" && (f[1] == "HELP" || f[1] == "TYPE") && counters[f[2]] {
			f[2] += "_total"
			line = strings.Join(f, " ")
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		return nil, fmt.Errorf("parse ztunnel metrics: %w", err)
	}
	return fams, nil
}
