package xds

import (
	"fmt"
	"sort"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// OTelAccessLogName is Envoy's OpenTelemetry access logger, istiod's OtelEnvoyALSName.
const OTelAccessLogName = "envoy.access_loggers.open_telemetry"

// otelWasmStateToLog is istiod's envoyWasmStateToLog: the peers' filter state objects
// its gRPC access loggers name.
var otelWasmStateToLog = []string{"upstream_peer", "downstream_peer",
	"wasm.upstream_peer", "wasm.upstream_peer_id", "wasm.downstream_peer", "wasm.downstream_peer_id"}

// otelAccessLog is istiod's openTelemetryLog for an envoyOtelAls provider: Envoy's
// OpenTelemetry access logger sending to the service's outbound cluster (the port's),
// the body Istio's text format unless the provider's logFormat.text, its labels as the
// records' attributes, without Envoy's built-in resource labels.
func otelAccessLog(p model.OTelAccessLogProvider) (*accesslogv3.AccessLog, error) {
	logName := p.LogName
	if logName == "" {
		logName = "otel_envoy_accesslog" // istiod's OtelEnvoyAccessLogFriendlyName
	}
	f := p.Format
	if f == "" {
		f = IstioTextLogFormat
	}
	cfg := &otelv3.OpenTelemetryAccessLogConfig{
		CommonConfig: &grpcv3.CommonGrpcAccessLogConfig{ //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
			LogName: logName,
			GrpcService: &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{
				ClusterName: fmt.Sprintf("outbound|%d||%s", p.Port, p.Service),
				Authority:   p.Service,
			}}},
			TransportApiVersion:     core.ApiVersion_V3,
			FilterStateObjectsToLog: otelWasmStateToLog,
		},
		DisableBuiltinLabels: true,
		Body:                 &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: f}},
	}
	if len(p.Labels) > 0 {
		keys := make([]string, 0, len(p.Labels))
		for k := range p.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kvs := &commonv1.KeyValueList{}
		for _, k := range keys {
			kvs.Values = append(kvs.Values, &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: p.Labels[k]}}})
		}
		cfg.Attributes = kvs
	}
	if err := cfg.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validate OpenTelemetry access log %s: %w", p.Name, err)
	}
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, cfg, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("pack OpenTelemetry access log %s: %w", p.Name, err)
	}
	return &accesslogv3.AccessLog{Name: OTelAccessLogName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}}, nil
}
