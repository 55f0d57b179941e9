package lab

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/observe"
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
	if l.istiod != nil && err == nil {
		err = l.istiod.Feed(ctx, m) // istiodcp: istiod generates, the relay serves
	}
	if l.metrics != nil {
		l.metrics.timeUpdate(start)
	}
	return err
}

// WriteMetrics implements web.MetricsWriter (lab/observe): the control plane's metrics,
// then every sidecar's, labelled by pod and namespace.
func (l *Lab) WriteMetrics(ctx context.Context, w io.Writer) error {
	var cp prometheus.Gatherer = prometheus.NewRegistry()
	if l.metrics != nil {
		cp = l.metrics.reg
	}
	return observe.WriteMetrics(ctx, l.below(), cp, l.log, w)
}
