package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/web"
)

var _ web.MetricsWriter = (*Lab)(nil)

// metrics are the control plane's own Prometheus metrics.
type metrics struct {
	reg       *prometheus.Registry
	connected prometheus.Gauge
	pushes    *prometheus.CounterVec
	acks      *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	updates   prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshlab_xds_connected_proxies", Help: "Proxies with an open ADS stream.",
		}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshlab_xds_pushes_total", Help: "xDS responses sent to proxies, by type.",
		}, []string{"type"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshlab_xds_acks_total", Help: "xDS responses proxies accepted, by type.",
		}, []string{"type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshlab_xds_nacks_total", Help: "xDS responses proxies rejected, by type.",
		}, []string{"type"}),
		updates: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meshlab_xds_update_duration_seconds",
			Help:    "Time to generate and set every proxy's snapshot after a change of the mesh.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	m.reg.MustRegister(m.connected, m.pushes, m.acks, m.nacks, m.updates)
	return m
}

// observe counts one discovery event. It never blocks.
func (m *metrics) observe(e discovery.Event) {
	short := e.TypeURL[strings.LastIndex(e.TypeURL, ".")+1:]
	switch e.Kind {
	case discovery.EventConnected:
		m.connected.Inc()
	case discovery.EventDisconnected:
		m.connected.Dec()
	case discovery.EventPushed:
		m.pushes.WithLabelValues(short).Inc()
	case discovery.EventACK:
		m.acks.WithLabelValues(short).Inc()
	case discovery.EventNACK:
		m.nacks.WithLabelValues(short).Inc()
	}
}

// timeUpdate records how long one discovery update took.
func (m *metrics) timeUpdate(start time.Time) { m.updates.Observe(time.Since(start).Seconds()) }

// updateProxies hands m to the discovery server, timing it for the update histogram;
// trigger says what caused it, for the proxies' config history (lab/history.go).
func (l *Lab) updateProxies(ctx context.Context, m *model.Model, trigger string) error {
	start := time.Now()
	m = l.withJWKS(ctx, m) // jwks.go: istiod inlines the keys of a jwksUri
	err := l.disc.UpdateFor(ctx, m, trigger)
	if l.metrics != nil {
		l.metrics.timeUpdate(start)
	}
	return err
}

// WriteMetrics implements web.MetricsWriter: the control plane's metrics, then every
// sidecar's /stats/prometheus with pod and namespace labels added, families merged by name.
func (l *Lab) WriteMetrics(ctx context.Context, w io.Writer) error {
	reg := prometheus.NewRegistry()
	if l.metrics != nil {
		reg = l.metrics.reg
	}
	families, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("gather control-plane metrics: %w", err)
	}
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
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
			fams, err := proxyMetrics(ctx, l.paths.AgentSocket(p.Name))
			if err != nil {
				l.log.Debug("proxy metrics unavailable", "pod", p.Name, "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			mergeFamilies(merged, fams, p.Name, p.Namespace)
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
func proxyMetrics(ctx context.Context, sock string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c := newAgentClient(sock)
	defer c.close()
	resp, err := c.get(ctx, "/admin/stats/prometheus")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /stats/prometheus: %s", resp.Status)
	}
	var p expfmt.TextParser
	return p.TextToMetricFamilies(resp.Body)
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
