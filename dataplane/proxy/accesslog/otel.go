package accesslog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	otelv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// OTelLoggerName is Envoy's OpenTelemetry access logger, which istiod sends for an
// envoyOtelAls extension provider.
const OTelLoggerName = "envoy.access_loggers.open_telemetry"

// The OpenTelemetry access logger (OpenTelemetryAccessLogConfig) as Envoy's: each entry
// becomes an OTLP LogRecord (time_unix_nano the request's start, body the format
// rendered, attributes the configured ones rendered), buffered and exported over gRPC
// to the common_config's envoy_grpc cluster (a cluster of the proxy: its hosts, its
// transport socket) at least every second (Envoy's buffer_flush_interval default) or
// when 16 KiB of bodies wait (buffer_size_bytes). The resource carries Envoy's built-in
// labels log_name, zone_name, cluster_name and node_name unless disable_builtin_labels
// (istiod sets it), then resource_attributes. Export failures drop the batch, as Envoy
// drops what it cannot send. filter_state_objects_to_log is accepted and not read: it
// feeds the gRPC HTTP/TCP access loggers' entries, not OpenTelemetry's records.

// ClusterDialer opens a connection to one host of a proxy's cluster, through the
// cluster's transport socket. It is safe for concurrent use.
type ClusterDialer interface {
	DialCluster(ctx context.Context, cluster string) (net.Conn, error)
}

// NodeInfo is what the built-in labels name: the proxy's node id, cluster and zone.
type NodeInfo struct{ ID, Cluster, Zone string }

var (
	otelDialer atomic.Pointer[ClusterDialer]
	otelNode   atomic.Pointer[NodeInfo]
)

// SetOTelClusters makes the OpenTelemetry loggers of this process export through d,
// for node n (the proxy sets both once its cluster manager exists).
func SetOTelClusters(d ClusterDialer, n NodeInfo) {
	otelDialer.Store(&d)
	otelNode.Store(&n)
}

const (
	otelFlushInterval = time.Second
	otelBufferBytes   = 16 * 1024
)

// otelLogger is one compiled OpenTelemetry access log.
type otelLogger struct {
	body  format
	attrs []otelAttr
	sink  *otelSink
}

type otelAttr struct {
	key string
	val format
}

// compileOTel compiles an OpenTelemetryAccessLogConfig.
func compileOTel(c *otelv3.OpenTelemetryAccessLogConfig) (*otelLogger, error) {
	if err := allow.Check(c); err != nil {
		return nil, fmt.Errorf("typed_config.%w", err)
	}
	cc := c.GetCommonConfig() //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
	eg := cc.GetGrpcService().GetEnvoyGrpc()
	if eg == nil || eg.GetClusterName() == "" {
		return nil, errors.New("typed_config.common_config.grpc_service: an envoy_grpc cluster_name is required (meshlab proxy sends to its own clusters)")
	}
	l := &otelLogger{}
	var err error
	body := c.GetBody().GetStringValue()
	if b := c.GetBody(); b != nil && b.GetValue() != nil {
		if _, ok := b.GetValue().(*commonv1.AnyValue_StringValue); !ok {
			return nil, errors.New("typed_config.body: only a string_value format is supported by meshlab proxy")
		}
	}
	if l.body, err = parseFormat(body); err != nil {
		return nil, fmt.Errorf("typed_config.body: %w", err)
	}
	for i, kv := range c.GetAttributes().GetValues() {
		s, ok := kv.GetValue().GetValue().(*commonv1.AnyValue_StringValue)
		if !ok {
			return nil, fmt.Errorf("typed_config.attributes.values[%d]: only string_value formats are supported by meshlab proxy", i)
		}
		f, err := parseFormat(s.StringValue)
		if err != nil {
			return nil, fmt.Errorf("typed_config.attributes.values[%d]: %w", i, err)
		}
		l.attrs = append(l.attrs, otelAttr{key: kv.GetKey(), val: f})
	}
	authority := eg.GetAuthority()
	if authority == "" {
		authority = eg.GetClusterName() // Envoy's default :authority is the cluster's name
	}
	var res []*commonv1.KeyValue
	if !c.GetDisableBuiltinLabels() {
		n := NodeInfo{}
		if p := otelNode.Load(); p != nil {
			n = *p
		}
		res = append(res, otelStr("log_name", cc.GetLogName()), otelStr("zone_name", n.Zone),
			otelStr("cluster_name", n.Cluster), otelStr("node_name", n.ID))
	}
	res = append(res, c.GetResourceAttributes().GetValues()...)
	l.sink = otelSinkFor(otelKey{cluster: eg.GetClusterName(), authority: authority, resource: resourceKey(res)}, res)
	return l, nil
}

func otelStr(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// resourceKey identifies a resource's attributes (string values; others by their type).
func resourceKey(kvs []*commonv1.KeyValue) string {
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, kv.GetKey()+"="+kv.GetValue().String())
	}
	sort.Strings(parts)
	return fmt.Sprint(parts)
}

// log renders one entry and hands it to the sink.
func (l *otelLogger) log(i *Info) {
	rec := &logsv1.LogRecord{
		TimeUnixNano: uint64(i.Start.UnixNano()), //nolint:gosec // times after 1970
		Body:         &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: l.body.render(i)}},
	}
	for _, a := range l.attrs {
		rec.Attributes = append(rec.Attributes, otelStr(a.key, a.val.render(i)))
	}
	l.sink.add(rec)
}

// otelKey identifies one exporter: Envoy shares a gRPC access logger between the
// loggers of one config (its cache key is the common config).
type otelKey struct{ cluster, authority, resource string }

var (
	otelSinksMu sync.Mutex
	otelSinks   = map[otelKey]*otelSink{}
)

// otelSink buffers records and exports them from one goroutine, started on the first
// record and living as long as the process (as Envoy's thread-local loggers). A record
// is exported within the flush interval of being buffered, as Envoy's periodic flush
// does; but with nothing buffered no timer runs: Envoy's flush timer fires every
// interval whatever it holds, and here each tick would wake an idle proxy every second
// for nothing once it has logged one request (issue 30's idle wake-ups).
type otelSink struct {
	key      otelKey
	resource []*commonv1.KeyValue
	mu       sync.Mutex
	buf      []*logsv1.LogRecord
	bytes    int
	queued   chan struct{} // signalled by the record that makes an empty buffer non-empty
	kick     chan struct{} // signalled when the buffer is full
	start    sync.Once
	// after is time.NewTimer's channel and Stop; tests count the timers.
	after func(time.Duration) (<-chan time.Time, func() bool)
}

func otelSinkFor(k otelKey, res []*commonv1.KeyValue) *otelSink {
	otelSinksMu.Lock()
	defer otelSinksMu.Unlock()
	if s, ok := otelSinks[k]; ok {
		return s
	}
	s := newOTelSink(k, res)
	otelSinks[k] = s
	return s
}

func newOTelSink(k otelKey, res []*commonv1.KeyValue) *otelSink {
	return &otelSink{
		key: k, resource: res, queued: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		after: func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		},
	}
}

// signal sends on a channel of capacity one without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (s *otelSink) add(r *logsv1.LogRecord) {
	s.start.Do(func() { go s.run() })
	s.mu.Lock()
	first := len(s.buf) == 0
	s.buf = append(s.buf, r)
	s.bytes += len(r.GetBody().GetStringValue())
	full := s.bytes >= otelBufferBytes
	s.mu.Unlock()
	if first {
		signal(s.queued)
	}
	if full {
		signal(s.kick)
	}
}

func (s *otelSink) take() []*logsv1.LogRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	s.buf, s.bytes = nil, 0
	return b
}

// run exports what is buffered a flush interval after the first record of it, or
// sooner when the buffer fills.
func (s *otelSink) run() {
	conn, err := grpc.NewClient("passthrough:///"+s.key.authority,
		grpc.WithTransportCredentials(insecure.NewCredentials()), // the cluster's transport socket secures the connection
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			d := otelDialer.Load()
			if d == nil {
				return nil, errors.New("no cluster manager to send access logs through")
			}
			return (*d).DialCluster(ctx, s.key.cluster)
		}))
	if err != nil {
		return // a constant target always parses
	}
	client := collogs.NewLogsServiceClient(conn)
	for {
		<-s.queued
		c, stop := s.after(otelFlushInterval)
		select {
		case <-c:
		case <-s.kick:
			stop()
		}
		recs := s.take()
		if len(recs) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = client.Export(ctx, &collogs.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{
			Resource:  &resourcev1.Resource{Attributes: s.resource},
			ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: recs}},
		}}})
		cancel()
	}
}
