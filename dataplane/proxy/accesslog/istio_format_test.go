package accesslog

import (
	"encoding/json"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istioTextFormat is Istio's default TEXT format, as the control plane sends it
// (controlplane/xds.IstioTextLogFormat; the proxy imports nothing from the control plane).
const istioTextFormat = `[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" ` +
	`%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% ` +
	`"%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% ` +
	`%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" ` +
	`"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% ` +
	`%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% ` +
	`%REQUESTED_SERVER_NAME% %ROUTE_NAME%` + "\n"

func istioSample() *Info {
	i := sample()
	i.Code, i.Flags, i.CodeDetails = 200, 0, "via_upstream"
	i.UpstreamLocal = "10.244.0.3:41000"
	i.RouteName = "default"
	i.RequestedServerName = "outbound_.8080_._.backend.default.svc.cluster.local"
	i.FilterChainName = "0.0.0.0_8080"
	return i
}

func TestIstioTextFormat(t *testing.T) {
	ls, err := Compile([]*accesslogv3.AccessLog{fileLog(t, &filev3.FileAccessLog{Path: "/dev/null",
		AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: istioTextFormat}}}}}})})
	if err != nil {
		t.Fatalf("Compile Istio's text format: %v", err)
	}
	testutil.Golden(t, "istio_format", []byte(ls[0].Render(istioSample())))
	// Unknown values render "-", as Envoy.
	line := ls[0].Render(&Info{})
	if !strings.Contains(line, `"- - -"`) || !strings.HasSuffix(line, " - - - - - -\n") {
		t.Errorf("empty entry = %q, want dashes", line)
	}
}

func TestNewOperators(t *testing.T) {
	i := istioSample()
	i.UpstreamTransportFailureReason = "TLS_error"
	i.ConnectionTerminationDetails = "rbac_access_denied"
	for _, tc := range []struct{ format, want string }{
		{"%FILTER_CHAIN_NAME%", "0.0.0.0_8080"},
		{"%REQUESTED_SERVER_NAME%", "outbound_.8080_._.backend.default.svc.cluster.local"},
		{"%UPSTREAM_TRANSPORT_FAILURE_REASON%", "TLS_error"},
		{"%CONNECTION_TERMINATION_DETAILS%", "rbac_access_denied"},
		{"%UPSTREAM_CLUSTER_RAW%", "outbound|9080|v1|reviews.default.svc.cluster.local"},
		{"%ROUTE_NAME%", "default"},
		{"%REQ(X-MISSING?X-REQUEST-ID)%", "rid"},
		{"%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "/orig"},
		{"%REQ(X-MISSING?X-ALSO-MISSING)%", "-"},
	} {
		f, err := parseFormat(tc.format)
		if err != nil {
			t.Errorf("parse %s: %v", tc.format, err)
			continue
		}
		if got := f.render(i); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.format, got, tc.want)
		}
	}
}

func TestIstioJSONFormatParses(t *testing.T) {
	fields := map[string]any{
		"start_time": "%START_TIME%", "route_name": "%ROUTE_NAME%", "method": "%REQ(:METHOD)%",
		"path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "protocol": "%PROTOCOL%", "response_code": "%RESPONSE_CODE%",
		"response_flags": "%RESPONSE_FLAGS%", "response_code_details": "%RESPONSE_CODE_DETAILS%",
		"connection_termination_details": "%CONNECTION_TERMINATION_DETAILS%", "bytes_received": "%BYTES_RECEIVED%",
		"bytes_sent": "%BYTES_SENT%", "duration": "%DURATION%", "upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
		"x_forwarded_for": "%REQ(X-FORWARDED-FOR)%", "user_agent": "%REQ(USER-AGENT)%", "request_id": "%REQ(X-REQUEST-ID)%",
		"authority": "%REQ(:AUTHORITY)%", "upstream_host": "%UPSTREAM_HOST%", "upstream_cluster": "%UPSTREAM_CLUSTER_RAW%",
		"upstream_local_address": "%UPSTREAM_LOCAL_ADDRESS%", "downstream_local_address": "%DOWNSTREAM_LOCAL_ADDRESS%",
		"downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%", "requested_server_name": "%REQUESTED_SERVER_NAME%",
		"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
	}
	s, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := Compile([]*accesslogv3.AccessLog{fileLog(t, &filev3.FileAccessLog{Path: "/dev/null",
		AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: s}}}})})
	if err != nil {
		t.Fatalf("Compile Istio's JSON format: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(ls[0].Render(istioSample())), &got); err != nil {
		t.Fatalf("line is not JSON: %v", err)
	}
	if got["request_id"] != "rid" || got["response_code"] != float64(200) || got["route_name"] != "default" ||
		got["upstream_cluster"] != "outbound|9080|v1|reviews.default.svc.cluster.local" || got["x_forwarded_for"] != nil {
		t.Errorf("JSON line = %v", got)
	}
}
