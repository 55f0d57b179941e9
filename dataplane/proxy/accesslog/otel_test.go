package accesslog

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// collector is an OTLP logs receiver that keeps what it is sent.
type collector struct {
	collogs.UnimplementedLogsServiceServer
	mu   sync.Mutex
	reqs []*collogs.ExportLogsServiceRequest
	got  chan struct{}
}

func (c *collector) Export(_ context.Context, r *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
	return &collogs.ExportLogsServiceResponse{}, nil
}

type dialFunc func(ctx context.Context, cluster string) (net.Conn, error)

func (f dialFunc) DialCluster(ctx context.Context, cluster string) (net.Conn, error) {
	return f(ctx, cluster)
}

// istiod's OpenTelemetryAccessLogConfig for an envoyOtelAls provider (the otel-provider
// page's): the entry reaches the collector through the named cluster as a record whose
// body is the format rendered, without built-in labels (disable_builtin_labels).
func TestOTelAccessLogExports(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{got: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	collogs.RegisterLogsServiceServer(srv, col)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	const cluster = "outbound|4317||opentelemetry-collector.istio-system.svc.cluster.local"
	var dialed sync.Map
	SetOTelClusters(dialFunc(func(ctx context.Context, c string) (net.Conn, error) {
		dialed.Store(c, true)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	}), NodeInfo{ID: "sidecar~10.0.0.1~sleep-1.default~default.svc.cluster.local"})
	cfg, err := anypb.New(&otelv3.OpenTelemetryAccessLogConfig{
		CommonConfig: &grpcv3.CommonGrpcAccessLogConfig{ //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
			LogName: "otel_envoy_accesslog",
			GrpcService: &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{
				ClusterName: cluster, Authority: "opentelemetry-collector.istio-system.svc.cluster.local",
			}}},
			TransportApiVersion:     core.ApiVersion_V3,
			FilterStateObjectsToLog: []string{"wasm.upstream_peer"},
		},
		DisableBuiltinLabels: true,
		Body:                 &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "%REQ(:METHOD)% %RESPONSE_CODE% %UPSTREAM_CLUSTER%\n"}},
		Attributes: &commonv1.KeyValueList{Values: []*commonv1.KeyValue{{Key: "path",
			Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "%REQ(:PATH)%"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := Compile([]*accesslogv3.AccessLog{{Name: OTelLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: cfg}}})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	start := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
	LogAll(ls, &Info{Start: start, Method: "GET", Path: "/status/418", Code: 418, UpstreamCluster: "outbound|8000||httpbin.default.svc.cluster.local"})
	select {
	case <-col.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no export within 10 s (Envoy flushes every second)")
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	rl := col.reqs[0].GetResourceLogs()[0]
	if n := len(rl.GetResource().GetAttributes()); n != 0 {
		t.Errorf("resource attributes with disable_builtin_labels: %v", rl.GetResource().GetAttributes())
	}
	rec := rl.GetScopeLogs()[0].GetLogRecords()[0]
	if b := rec.GetBody().GetStringValue(); b != "GET 418 outbound|8000||httpbin.default.svc.cluster.local\n" {
		t.Errorf("body %q", b)
	}
	if rec.GetTimeUnixNano() != uint64(start.UnixNano()) || len(rec.GetAttributes()) != 1 || rec.GetAttributes()[0].GetValue().GetStringValue() != "/status/418" {
		t.Errorf("record %v", rec)
	}
	if _, ok := dialed.Load(cluster); !ok {
		t.Errorf("not sent through cluster %s", cluster)
	}
}

// What meshlab proxy does not send is refused by name.
func TestOTelAccessLogRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  *otelv3.OpenTelemetryAccessLogConfig
		want string
	}{
		{&otelv3.OpenTelemetryAccessLogConfig{CommonConfig: &grpcv3.CommonGrpcAccessLogConfig{LogName: "x"}}, "GrpcService: value is required"}, //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
		{&otelv3.OpenTelemetryAccessLogConfig{
			CommonConfig: &grpcv3.CommonGrpcAccessLogConfig{LogName: "x", GrpcService: &core.GrpcService{TargetSpecifier: &core.GrpcService_GoogleGrpc_{GoogleGrpc: &core.GrpcService_GoogleGrpc{TargetUri: "x", StatPrefix: "s"}}}}, //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
		}, "google_grpc: field is not supported"},
		{&otelv3.OpenTelemetryAccessLogConfig{
			CommonConfig: &grpcv3.CommonGrpcAccessLogConfig{LogName: "x", GrpcService: &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: "c"}}}}, //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
			Body:         &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 1}},
		}, "string_value"},
	} {
		cfg, _ := anypb.New(tc.cfg)
		_, err := Compile([]*accesslogv3.AccessLog{{Name: OTelLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: cfg}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile = %v, want it to name %s", err, tc.want)
		}
	}
}

// A sink runs a flush timer only for what it holds: the first record into an empty
// buffer arms one, later records ride on it, and once that export is done no timer runs
// until the next record (an idle proxy is not woken every flush interval).
func TestOTelSinkTimesOnlyWhatIsBuffered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{got: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	collogs.RegisterLogsServiceServer(srv, col)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	SetOTelClusters(dialFunc(func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	}), NodeInfo{ID: "sidecar~10.0.0.1~sleep-1.default~default.svc.cluster.local"})

	s := newOTelSink(otelKey{cluster: "outbound|4317||collector", authority: "collector"}, nil)
	timers := make(chan chan time.Time, 4)
	s.after = func(time.Duration) (<-chan time.Time, func() bool) {
		c := make(chan time.Time, 1)
		timers <- c
		return c, func() bool { return true }
	}
	rec := func(body string) *logsv1.LogRecord {
		return &logsv1.LogRecord{Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: body}}}
	}
	nextTimer := func(why string) chan time.Time {
		t.Helper()
		select {
		case c := <-timers:
			return c
		case <-time.After(5 * time.Second):
			t.Fatalf("no flush timer: %s", why)
			return nil
		}
	}
	noTimer := func(why string) {
		t.Helper()
		select {
		case <-timers:
			t.Fatalf("a flush timer %s", why)
		case <-time.After(200 * time.Millisecond):
		}
	}
	exported := func(want int) {
		t.Helper()
		select {
		case <-col.got:
		case <-time.After(10 * time.Second):
			t.Fatal("no export")
		}
		col.mu.Lock()
		defer col.mu.Unlock()
		got := col.reqs[len(col.reqs)-1].GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()
		if len(got) != want {
			t.Errorf("exported %d records, want %d", len(got), want)
		}
	}

	s.add(rec("one"))
	nextTimer("for the first record") <- time.Now()
	exported(1)
	noTimer("with nothing buffered")
	s.add(rec("two"))
	fire := nextTimer("for the first record after an export")
	s.add(rec("three"))
	noTimer("for a record that rides on the running one")
	fire <- time.Now()
	exported(2)
	noTimer("after the second export, with nothing buffered")
}
