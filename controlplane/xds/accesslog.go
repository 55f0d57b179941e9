package xds

import (
	"fmt"
	"slices"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// IstioTextLogFormat is Istio's default TEXT access log format (EnvoyTextLogFormat in
// istio pilot/pkg/model/telemetry_logging.go).
const IstioTextLogFormat = `[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" ` +
	`%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% ` +
	`"%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% ` +
	`%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" ` +
	`"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% ` +
	`%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% ` +
	`%REQUESTED_SERVER_NAME% %ROUTE_NAME%` + "\n"

// IstioJSONLogFormat is Istio's default JSON access log format (EnvoyJSONLogFormatIstio in
// istio pilot/pkg/model/telemetry_logging.go): field name to Envoy format string.
var IstioJSONLogFormat = map[string]string{
	"start_time":                        "%START_TIME%",
	"route_name":                        "%ROUTE_NAME%",
	"method":                            "%REQ(:METHOD)%",
	"path":                              "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
	"protocol":                          "%PROTOCOL%",
	"response_code":                     "%RESPONSE_CODE%",
	"response_flags":                    "%RESPONSE_FLAGS%",
	"response_code_details":             "%RESPONSE_CODE_DETAILS%",
	"connection_termination_details":    "%CONNECTION_TERMINATION_DETAILS%",
	"bytes_received":                    "%BYTES_RECEIVED%",
	"bytes_sent":                        "%BYTES_SENT%",
	"duration":                          "%DURATION%",
	"upstream_service_time":             "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
	"x_forwarded_for":                   "%REQ(X-FORWARDED-FOR)%",
	"user_agent":                        "%REQ(USER-AGENT)%",
	"request_id":                        "%REQ(X-REQUEST-ID)%",
	"authority":                         "%REQ(:AUTHORITY)%",
	"upstream_host":                     "%UPSTREAM_HOST%",
	"upstream_cluster":                  "%UPSTREAM_CLUSTER_RAW%",
	"upstream_local_address":            "%UPSTREAM_LOCAL_ADDRESS%",
	"downstream_local_address":          "%DOWNSTREAM_LOCAL_ADDRESS%",
	"downstream_remote_address":         "%DOWNSTREAM_REMOTE_ADDRESS%",
	"requested_server_name":             "%REQUESTED_SERVER_NAME%",
	"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
}

// accessLogs returns the access_log every HCM and tcp_proxy of the mesh carries, as
// Istio's FileAccessLogFromMeshConfig builds it; nil when access logs are off.
func accessLogs(mesh model.MeshConfig) ([]*accesslogv3.AccessLog, error) {
	if mesh.AccessLogProviders != nil {
		return providerAccessLogs(mesh)
	}
	path := mesh.AccessLogPath()
	if path == "" {
		return nil, nil
	}
	sf := &core.SubstitutionFormatString{}
	switch mesh.AccessLogEncoding {
	case model.AccessLogJSON:
		js, err := jsonLogFormat(mesh.AccessLogFormat)
		if err != nil {
			return nil, err
		}
		sf.Format = &core.SubstitutionFormatString_JsonFormat{JsonFormat: js}
	default:
		f := mesh.AccessLogFormat
		if f == "" {
			f = IstioTextLogFormat
		} else if !strings.HasSuffix(f, "\n") {
			f += "\n" // as Istio: "Istio will insert a newline on all formats (if missing)"
		}
		sf.Format = &core.SubstitutionFormatString_TextFormatSource{TextFormatSource: &core.DataSource{
			Specifier: &core.DataSource_InlineString{InlineString: f},
		}}
	}
	fl := &filev3.FileAccessLog{
		Path:            path,
		AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: sf},
	}
	if err := fl.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validate access log: %w", err)
	}
	// Packed deterministically: a JSON format is a map, and the discovery server compares
	// marshalled snapshots to decide whether to push.
	cfg := &anypb.Any{}
	if err := anypb.MarshalFrom(cfg, fl, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("pack access log: %w", err)
	}
	return []*accesslogv3.AccessLog{{Name: wellknown.FileAccessLog, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: cfg}}}, nil
}

// providerAccessLogs are the access logs of the providers MeshFor chose, in their order:
// the built-in envoy's file log (/dev/stdout in the mesh's format and encoding), an
// envoyOtelAls provider's OpenTelemetry log (accesslog_otel.go). A name the mesh config
// has no provider of is skipped, as istiod skips it.
func providerAccessLogs(mesh model.MeshConfig) ([]*accesslogv3.AccessLog, error) {
	var out []*accesslogv3.AccessLog
	for _, n := range mesh.AccessLogProviders {
		if n == model.EnvoyAccessLogProvider {
			file := mesh
			file.AccessLogProviders, file.AccessLogOff, file.AccessLogFile = nil, false, model.DefaultAccessLogFile
			l, err := accessLogs(file)
			if err != nil {
				return nil, err
			}
			out = append(out, l...)
			continue
		}
		p, ok := mesh.OTelAccessLogProvider(n)
		if !ok {
			continue
		}
		l, err := otelAccessLog(p)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// jsonLogFormat returns the JSON format: the user's accessLogFormat (a JSON object) or
// Istio's default.
func jsonLogFormat(user string) (*structpb.Struct, error) {
	if user != "" {
		s := &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(user), s); err != nil {
			return nil, fmt.Errorf("parse accessLogFormat as a JSON object: %w", err)
		}
		return s, nil
	}
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(IstioJSONLogFormat))}
	for k, v := range IstioJSONLogFormat {
		s.Fields[k] = structpb.NewStringValue(v)
	}
	return s, nil
}

// addAccessLogs sets logs as the access_log of every http_connection_manager and
// tcp_proxy filter of the listeners, outbound and inbound, as Istio does, except the
// blackhole chains' (a loop to the capture ports is not a request); the listeners that
// bind a port (virtualOutbound, virtualInbound) also log, as Istio's
// setListenerAccessLog, the connections no filter chain matched (response flag NR).
func addAccessLogs(ls []types.Resource, logs []*accesslogv3.AccessLog) error {
	if len(logs) == 0 {
		return nil
	}
	nr := &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
		ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"NR"}},
	}}
	for _, r := range ls {
		l := r.(*listener.Listener)
		if n := l.GetName(); n == VirtualOutboundListener || n == VirtualInboundListener {
			for _, al := range logs {
				withNR := proto.Clone(al).(*accesslogv3.AccessLog)
				withNR.Filter = nr
				l.AccessLog = append(l.AccessLog, withNR)
			}
		}
		chains := l.GetFilterChains()
		if l.GetDefaultFilterChain() != nil {
			chains = append(chains[:len(chains):len(chains)], l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			if strings.HasSuffix(fc.GetName(), "-blackhole") {
				continue
			}
			for _, f := range fc.GetFilters() {
				if err := addAccessLog(f, logs); err != nil {
					return fmt.Errorf("add access log to listener %s chain %q: %w", l.GetName(), fc.GetName(), err)
				}
			}
		}
	}
	return nil
}

func addAccessLog(f *listener.Filter, logs []*accesslogv3.AccessLog) error {
	var msg proto.Message
	switch f.GetName() {
	case wellknown.HTTPConnectionManager:
		m := &hcm.HttpConnectionManager{}
		if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
			return fmt.Errorf("unpack %s: %w", f.GetName(), err)
		}
		m.AccessLog = logs
		msg = m
	case wellknown.TCPProxy:
		m := &tcpproxy.TcpProxy{}
		if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
			return fmt.Errorf("unpack %s: %w", f.GetName(), err)
		}
		m.AccessLog = logs
		msg = m
	default:
		return nil
	}
	cfg, err := typed(msg)
	if err != nil {
		return err
	}
	f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: cfg}
	return nil
}

// MeshFor returns the mesh settings the proxy of pod is generated with: the lab's
// MeshConfig, its access log decided by the most specific Telemetry with access logging
// that applies to the pod (one whose selector matches it in its namespace, else its
// namespace's without a selector, else the root namespace's), as istiod lets a
// Telemetry's accessLogging override MeshConfig's accessLogFile. The one provider is
// Istio's built-in envoy (/dev/stdout, in the mesh's format and encoding); an entry with
// disabled: true turns the log off.
func MeshFor(m *model.Model, pod *model.Pod) model.MeshConfig {
	mesh := m.Mesh
	if pod == nil {
		return mesh
	}
	root := mesh.Root()
	var best *model.IstioConfig[*telemetry.Telemetry]
	rank := func(t *model.IstioConfig[*telemetry.Telemetry]) int {
		switch {
		case len(t.Spec.GetSelector().GetMatchLabels()) > 0:
			return 3
		case t.Namespace == pod.Namespace:
			return 2
		}
		return 1
	}
	for _, t := range m.Istio.Telemetries {
		if len(t.Spec.GetAccessLogging()) == 0 || !PolicySelects(t.Namespace, t.Spec.GetSelector(), root, pod) {
			continue
		}
		if best == nil || rank(t) > rank(best) {
			best = t // Telemetries are sorted by namespace and name: the first of a rank wins
		}
	}
	if best == nil {
		// No Telemetry logs this proxy: defaultProviders.accessLogging, when the mesh
		// config names some, else accessLogFile (istiod's fallback).
		if len(mesh.DefaultAccessLogProviders) > 0 {
			mesh.AccessLogProviders = mesh.DefaultAccessLogProviders
		}
		return mesh
	}
	off := false
	var names []string
	for _, al := range best.Spec.GetAccessLogging() {
		if al.GetDisabled().GetValue() {
			off = true
		}
		for _, p := range al.GetProviders() {
			names = append(names, p.GetName())
		}
	}
	mesh.AccessLogOff = off
	if off {
		return mesh
	}
	if len(names) == 0 {
		names = mesh.DefaultAccessLogProviders
	}
	if len(names) == 0 {
		names = []string{model.EnvoyAccessLogProvider}
	}
	mesh.AccessLogProviders = names
	if slices.Contains(names, model.EnvoyAccessLogProvider) {
		mesh.AccessLogFile = model.DefaultAccessLogFile // the envoy provider's path
	} else {
		mesh.AccessLogOff = true // no file log: the providers named are others
	}
	return mesh
}
