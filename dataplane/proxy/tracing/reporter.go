package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Envoy's Zipkin reporter and OpenTelemetry tracer flush their buffer once it holds
// min_flush_spans spans (runtime tracing.zipkin.min_flush_spans,
// tracing.opentelemetry.min_flush_spans, default 5) or when their flush timer fires
// (flush_interval_ms, default 5000).
const (
	minFlushSpans = 5
	flushInterval = 5 * time.Second
)

// Node is what the proxy's spans say of it: the node's id and zone (the node_id and
// zone tags), its cluster (the local endpoint's service name: "productpage.default"
// for an Istio sidecar) and its address.
type Node struct {
	ID, Cluster, Zone string
	Address           netip.Addr
}

// Tracer reports the spans of one proxy: one reporter per collector, each buffering
// spans until a flush posts them. Safe for concurrent use; it holds no goroutine
// between flushes.
type Tracer struct {
	node     Node
	clusters *cluster.Manager
	log      *slog.Logger
	sent     *stats.Stat // tracing.zipkin.spans_sent
	reports  *stats.Stat // tracing.zipkin.reports_sent
	dropped  *stats.Stat // tracing.zipkin.reports_dropped (the collector's non-2xx answer)
	failed   *stats.Stat // tracing.zipkin.reports_failed (no host, no answer)
	timer    *stats.Stat // tracing.zipkin.timer_flushed
	otel     otelStats

	// def is the bootstrap's tracer (tracing.http), which an HCM whose tracing names no
	// provider uses; nil for none. Set before the tracer is shared.
	def *Zipkin

	mu        sync.Mutex
	reporters map[string]*reporter        // by collector: cluster, host, path
	conns     map[string]*grpc.ClientConn // OTLP/gRPC exporters' channels, by cluster and authority
}

// New returns the tracer of a proxy whose clusters carry the reports and whose store
// counts them (Envoy's tracing.zipkin.* counters).
func New(node Node, clusters *cluster.Manager, st *stats.Store, log *slog.Logger) *Tracer {
	sc := st.Named("tracing.zipkin")
	return &Tracer{
		node: node, clusters: clusters, log: log,
		sent: sc.Counter("spans_sent"), reports: sc.Counter("reports_sent"), dropped: sc.Counter("reports_dropped"),
		failed: sc.Counter("reports_failed"), timer: sc.Counter("timer_flushed"),
		otel:      newOTelStats(st),
		reporters: map[string]*reporter{}, conns: map[string]*grpc.ClientConn{},
	}
}

// Close closes the OTLP/gRPC exporters' channels. Spans reported later are dropped.
func (t *Tracer) Close() {
	t.mu.Lock()
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// WithDefault sets the bootstrap's tracer (Envoy's bootstrap tracing.http): the one an
// HTTP connection manager whose tracing block has no provider uses. It returns t; call
// it before t is shared.
func (t *Tracer) WithDefault(z *Zipkin) *Tracer {
	t.def = z
	return t
}

// Default is the bootstrap's tracer, nil without one (or on a nil Tracer).
func (t *Tracer) Default() *Zipkin {
	if t == nil {
		return nil
	}
	return t.def
}

// Node is the node the tracer's spans describe.
func (t *Tracer) Node() Node { return t.node }

// Provider is a compiled tracer (Zipkin's or OpenTelemetry's): how a request's span
// starts and what kind it is, and how finished spans reach its collector. Compiled
// providers are immutable and safe for concurrent use.
type Provider interface {
	// Start begins the span of one request at a proxy from the request's trace
	// context (its headers), or a new trace's root span sampled when traced; nil when
	// the context is present but malformed (Envoy's NullSpan: nothing is traced or
	// propagated).
	Start(h http.Header, kind, name string, traced bool, now time.Time) *Span
	// SpanKind is the kind of the HCM's span on an inbound (or other) listener, with
	// or without spawn_upstream_span.
	SpanKind(inbound, spawnUpstream bool) string
	// collector names where the spans go: providers with one collector share a reporter.
	collector() string
	// export sends one batch (timer: the flush timer's) and counts it.
	export(t *Tracer, batch []*Span, timer bool)
}

var (
	_ Provider = (*Zipkin)(nil)
	_ Provider = (*OTel)(nil)
)

// SpanKind is Zipkin's: SERVER on inbound listeners, CLIENT otherwise.
func (z *Zipkin) SpanKind(inbound, _ bool) string {
	if inbound {
		return KindServer
	}
	return KindClient
}

func (z *Zipkin) collector() string {
	return "zipkin\x00" + z.Cluster + "\x00" + z.Host + "\x00" + z.Path
}

func (z *Zipkin) export(t *Tracer, batch []*Span, timer bool) {
	if timer {
		t.timer.Inc()
	}
	t.send(z, batch)
}

// Report queues a finished span for p's collector; an unsampled span is dropped.
func (t *Tracer) Report(p Provider, s *Span) {
	if !s.Sampled {
		return
	}
	// One reporter per collector, shared by every HCM that names it: listener
	// updates compile new configs of the same collector.
	key := p.collector()
	t.mu.Lock()
	r := t.reporters[key]
	if r == nil {
		r = &reporter{t: t, p: p}
		t.reporters[key] = r
	}
	t.mu.Unlock()
	r.add(s)
}

// reporter buffers the spans of one collector.
type reporter struct {
	t *Tracer
	p Provider

	mu    sync.Mutex
	buf   []*Span
	timer *time.Timer
}

func (r *reporter) add(s *Span) {
	r.mu.Lock()
	r.buf = append(r.buf, s)
	var batch []*Span
	if len(r.buf) >= minFlushSpans {
		batch, r.buf = r.buf, nil
		if r.timer != nil {
			r.timer.Stop()
			r.timer = nil
		}
	} else if r.timer == nil {
		r.timer = time.AfterFunc(flushInterval, r.flushTimer)
	}
	r.mu.Unlock()
	if batch != nil {
		go r.p.export(r.t, batch, false)
	}
}

func (r *reporter) flushTimer() {
	r.mu.Lock()
	batch := r.buf
	r.buf, r.timer = nil, nil
	r.mu.Unlock()
	if len(batch) > 0 {
		r.p.export(r.t, batch, true)
	}
}

// send posts batch to z's collector as a Zipkin v2 JSON list.
func (t *Tracer) send(z *Zipkin, batch []*Span) {
	body, err := json.Marshal(t.encode(batch))
	if err != nil {
		t.failed.Inc()
		return
	}
	if err := t.post(z, body); err != nil {
		t.log.Debug("zipkin: report failed", "cluster", z.Cluster, "spans", len(batch), "err", err)
		return
	}
	t.sent.Add(int64(len(batch)))
}

func (t *Tracer) post(z *Zipkin, body []byte) error {
	cl, ok := t.clusters.Get(z.Cluster)
	if !ok {
		t.failed.Inc()
		return fmt.Errorf("collector cluster %s not found", z.Cluster)
	}
	h, err := cl.Pick(netip.AddrPort{})
	if err != nil {
		t.failed.Inc()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), z.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+z.Host+z.Path, bytes.NewReader(body))
	if err != nil {
		t.failed.Inc()
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, kv := range z.Headers {
		req.Header.Set(kv[0], kv[1])
	}
	resp, err := cl.RoundTrip(req, h)
	if err != nil {
		t.failed.Inc()
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	t.reports.Inc()
	if resp.StatusCode/100 != 2 {
		t.dropped.Inc()
		return fmt.Errorf("collector answered %s", resp.Status)
	}
	return nil
}

// jsonSpan is a span as Zipkin's v2 JSON writes it.
type jsonSpan struct {
	TraceID       string            `json:"traceId"`
	ParentID      string            `json:"parentId,omitempty"`
	ID            string            `json:"id"`
	Kind          string            `json:"kind,omitempty"`
	Name          string            `json:"name,omitempty"`
	Timestamp     int64             `json:"timestamp"`
	Duration      int64             `json:"duration"`
	LocalEndpoint *jsonEndpoint     `json:"localEndpoint,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	Shared        bool              `json:"shared,omitempty"`
}

type jsonEndpoint struct {
	ServiceName string `json:"serviceName,omitempty"`
	IPv4        string `json:"ipv4,omitempty"`
	IPv6        string `json:"ipv6,omitempty"`
	Port        int    `json:"port"`
}

func (t *Tracer) encode(batch []*Span) []jsonSpan {
	ep := &jsonEndpoint{ServiceName: t.node.Cluster}
	if a := t.node.Address; a.Is4() {
		ep.IPv4 = a.String()
	} else if a.IsValid() {
		ep.IPv6 = a.String()
	}
	out := make([]jsonSpan, len(batch))
	for i, s := range batch {
		d := s.Duration.Microseconds()
		if d < 1 {
			d = 1
		}
		out[i] = jsonSpan{
			TraceID: s.TraceID, ParentID: s.ParentID, ID: s.ID, Kind: s.Kind, Name: s.Name,
			Timestamp: s.Start.UnixMicro(), Duration: d, LocalEndpoint: ep, Tags: s.Tags, Shared: s.Shared,
		}
	}
	return out
}
