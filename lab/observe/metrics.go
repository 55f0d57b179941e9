package observe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	ztmetrics "github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
)

// WriteMetrics is the lab's web.MetricsWriter: the control plane's metrics (cp), then
// every sidecar's /stats/prometheus and the ztunnel's with pod and namespace labels
// added (as Prometheus's pod scrape adds them), families merged by name: ztunnel's
// istio_tcp_* series (reporter source and destination, connection_security_policy
// mutual_tls over HBONE) sit beside the sidecars' in one family, so one query sees the
// sidecar and the ambient traffic. A proxy that does not answer is left out (logged at
// debug level).
func WriteMetrics(ctx context.Context, d Deps, cp prometheus.Gatherer, log *slog.Logger, w io.Writer) error {
	families, err := cp.Gather()
	if err != nil {
		return fmt.Errorf("gather control-plane metrics: %w", err)
	}
	m := d.Model()
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		merged = map[string]*dto.MetricFamily{}
	)
	for _, p := range m.Pods {
		if !p.Sidecar.Inject {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fams, err := proxyMetrics(ctx, d, p.Key())
			if err != nil {
				log.Debug("proxy metrics unavailable", "pod", p.Key(), "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			mergeFamilies(merged, fams, p.Name, p.Namespace)
		}()
	}
	if z := d.Ztunnel(); z != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fams, err := ztunnelMetrics(ctx, d)
			if err != nil {
				log.Debug("ztunnel metrics unavailable", "pod", z.Key(), "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			mergeFamilies(merged, fams, z.Name, z.Namespace)
		}()
	}
	wg.Wait()
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		families = append(families, merged[n])
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("encode metric %s: %w", f.GetName(), err)
		}
	}
	return nil
}

// proxyMetrics reads and parses one proxy's /stats/prometheus through its agent.
func proxyMetrics(ctx context.Context, d Deps, pod string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, err := d.AgentGet(ctx, pod, "/admin/stats/prometheus")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var p expfmt.TextParser
	return p.TextToMetricFamilies(body)
}

// ztunnelMetrics reads and parses the ztunnel's /stats/prometheus (OpenMetrics text,
// whose counter families ztunnel names without _total: metrics.Families names them as
// Prometheus text and the sidecars do).
func ztunnelMetrics(ctx context.Context, d Deps) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, err := d.ZtunnelMetrics(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return ztmetrics.Families(body)
}

// mergeFamilies adds fams into into, each metric labelled with its pod and namespace.
func mergeFamilies(into, fams map[string]*dto.MetricFamily, pod, namespace string) {
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			m.Label = append(m.Label,
				&dto.LabelPair{Name: proto.String("pod"), Value: proto.String(pod)},
				&dto.LabelPair{Name: proto.String("namespace"), Value: proto.String(namespace)})
			sort.Slice(m.Label, func(i, j int) bool { return m.Label[i].GetName() < m.Label[j].GetName() })
		}
		if have, ok := into[name]; ok && have.GetType() == f.GetType() {
			have.Metric = append(have.Metric, f.GetMetric()...)
			continue
		}
		into[name] = f
	}
}
