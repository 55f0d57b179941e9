package xds

import (
	"testing"

	otelv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	telemetry "istio.io/api/telemetry/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// outboundLogNames returns the access loggers of the outbound HTTP listener on 8080.
func outboundLogNames(t *testing.T, m *model.Model, pod string) ([]string, *otelv3.OpenTelemetryAccessLogConfig) {
	t.Helper()
	res := generate(t, m, pod)
	var h hcm.HttpConnectionManager
	if err := findListener(t, res, "0.0.0.0_8080").GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	var names []string
	var otel *otelv3.OpenTelemetryAccessLogConfig
	for _, al := range h.GetAccessLog() {
		names = append(names, al.GetName())
		if al.GetName() == OTelAccessLogName {
			otel = &otelv3.OpenTelemetryAccessLogConfig{}
			if err := al.GetTypedConfig().UnmarshalTo(otel); err != nil {
				t.Fatal(err)
			}
		}
	}
	return names, otel
}

// The otel-provider page: a Telemetry naming the mesh's envoyOtelAls provider gives the
// pods it selects istiod's OpenTelemetry access logger (to the collector service's
// outbound cluster, Istio's text format, no built-in labels) instead of the file log;
// other pods keep the mesh's accessLogFile; defaultProviders.accessLogging applies where
// no Telemetry logs.
func TestOTelAccessLogProvider(t *testing.T) {
	t.Parallel()
	m := helloModel()
	m.Mesh.AccessLogFile = "/dev/stdout"
	m.Mesh.OTelAccessLogProviders = []model.OTelAccessLogProvider{{Name: "otel", Service: "opentelemetry-collector.istio-system.svc.cluster.local", Port: 4317}}
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{{Name: "sleep-logging", Namespace: "default", Spec: &telemetry.Telemetry{
		Selector:      &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "frontend"}},
		AccessLogging: []*telemetry.AccessLogging{{Providers: []*telemetry.ProviderRef{{Name: "otel"}}}},
	}}}
	names, otel := outboundLogNames(t, m, "frontend-v1")
	if len(names) != 1 || otel == nil {
		t.Fatalf("frontend's access logs %q, want the OpenTelemetry one alone", names)
	}
	eg := otel.GetCommonConfig().GetGrpcService().GetEnvoyGrpc() //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
	if eg.GetClusterName() != "outbound|4317||opentelemetry-collector.istio-system.svc.cluster.local" || eg.GetAuthority() != "opentelemetry-collector.istio-system.svc.cluster.local" ||
		otel.GetCommonConfig().GetLogName() != "otel_envoy_accesslog" || !otel.GetDisableBuiltinLabels() || otel.GetBody().GetStringValue() != IstioTextLogFormat { //nolint:staticcheck // istiod still sends common_config (deprecated for top-level fields in Envoy's newest API), so the proxy reads it
		t.Errorf("OpenTelemetry access log: %v", otel)
	}
	if names, _ := outboundLogNames(t, m, "backend-v1"); len(names) != 1 || names[0] != wellknown.FileAccessLog {
		t.Errorf("backend's access logs %q, want the mesh's file log", names)
	}
	m.Mesh.DefaultAccessLogProviders = []string{"envoy", "otel"}
	if names, otel := outboundLogNames(t, m, "backend-v1"); len(names) != 2 || names[0] != wellknown.FileAccessLog || otel == nil {
		t.Errorf("backend's access logs with defaultProviders envoy, otel: %q", names)
	}
}
