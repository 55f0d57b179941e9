package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/meshlab/meshlab/dataplane/ztunnel/accesslog"
)

// hboneLogWait bounds how long an hbone check waits for ztunnel's access log lines of
// connections its metrics already count.
const hboneLogWait = 5 * time.Second

// hbone evaluates an hbone check: ztunnel's own account of the edge From -> To, from its
// metrics (connections opened, reported by the destination over mutual TLS) and its
// access log (connection complete, with the HBONE address it tunnelled to).
func (r *Runner) hbone(ctx context.Context, l *Lab, c HBONECheck, res *Result) {
	res.Want = fmt.Sprintf("%s -> %s carried by ztunnel over HBONE: connections in its metrics with connection_security_policy=\"mutual_tls\" and \"connection complete\" lines with dst.hbone_addr in its log", c.From, c.To)
	res.Hint = "is the namespace in ambient mode (meshlab zc workloads shows PROTOCOL HBONE)? read ztunnel's log (" +
		"meshlab logs ds/ztunnel -n istio-system) and its metrics (localhost:15020/stats/prometheus in its namespace)"
	metrics, err := r.Backend.ZtunnelMetrics(ctx)
	if err != nil {
		res.Saw = err.Error()
		return
	}
	opened, err := mtlsConnections(metrics, cmpOr(l.workloads[c.From], c.From), cmpOr(l.workloads[c.To], c.To))
	if err != nil {
		res.Saw = "ztunnel's metrics: " + err.Error()
		return
	}
	// ztunnel logs a connection when it closes, a moment after the client closed it:
	// once the metrics show connections, give the lines that long to appear.
	var lines, failed int
	var hboneAddr, failure string
	deadline := time.Now().Add(hboneLogWait)
	for {
		log, err := r.Backend.ZtunnelLog()
		if err != nil {
			res.Saw = err.Error()
			return
		}
		lines, hboneAddr, failed, failure = hboneLines(log, c.From, c.To)
		if lines > 0 || opened == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			res.Saw = ctx.Err().Error()
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.Saw = fmt.Sprintf("%d connections opened over mutual_tls in ztunnel's metrics, %d connection complete lines over HBONE in its log", opened, lines)
	if hboneAddr != "" {
		res.Saw += " (dst.hbone_addr=" + hboneAddr + ")"
	}
	// A connection that failed says why in its line: a failure of the check under load
	// must say which step of the tunnel gave way without the log, gone with the lab.
	if failed > 0 {
		res.Saw += fmt.Sprintf(", and %d that failed (the last: %s)", failed, failure)
	}
	res.Passed = opened > 0 && lines > 0
}

// mtlsConnections sums istio_tcp_connections_opened_total of the connections from
// workload src to workload dst that the destination reported over mutual TLS.
func mtlsConnections(text []byte, src, dst string) (uint64, error) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return 0, err
	}
	// ztunnel writes the family as istio_tcp_connections_opened (TYPE counter) and its
	// samples with _total, which this parser files under the sample's name, untyped.
	var n float64
	ms := append(fams["istio_tcp_connections_opened"].GetMetric(), fams["istio_tcp_connections_opened_total"].GetMetric()...)
	for _, m := range ms {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["reporter"] == "destination" && labels["source_workload"] == src && labels["destination_workload"] == dst &&
			labels["connection_security_policy"] == "mutual_tls" {
			n += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return uint64(n), nil
}

// hboneLines counts ztunnel's access log lines of completed connections from pod src to
// pod dst that went through an HBONE tunnel, and returns the tunnel's address of one;
// failed counts those lines that carry an error, failure is the last one's direction
// and error.
func hboneLines(log []byte, src, dst string) (n int, hboneAddr string, failed int, failure string) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rec, ok := accesslog.Parse(sc.Text())
		if !ok || rec.Message != "connection complete" {
			continue
		}
		f := rec.Fields
		if f["src.workload"] != src || f["dst.workload"] != dst || f["dst.hbone_addr"] == "" {
			continue
		}
		if f["error"] != "" {
			failed++
			failure = fmt.Sprintf("%s error=%q", f["direction"], f["error"])
			continue
		}
		n++
		hboneAddr = f["dst.hbone_addr"]
	}
	return n, hboneAddr, failed, failure
}
