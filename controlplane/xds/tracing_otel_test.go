package xds

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	tracecfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// otelTracingModel is the hello model with samples/open-telemetry/otel.yaml's collector
// service in observability, the opentelemetry page's otel-tracing provider and its
// otel-demo Telemetry (100 %, the literal my-attribute).
func otelTracingModel(p model.OTelTracingProvider) *model.Model {
	m := helloModel()
	m.Services = append(m.Services, &model.Service{
		Name: "opentelemetry-collector", Namespace: "observability", VIP: netip.MustParseAddr("10.96.0.41"),
		Ports: []model.ServicePort{
			{Name: "grpc-otlp", Port: 4317, TargetPort: 4317, Protocol: model.ProtocolGRPC},
			{Name: "http-otlp", Port: 4318, TargetPort: 4318, Protocol: model.ProtocolHTTP},
		},
		Selector: map[string]string{"app": "opentelemetry-collector"},
	})
	m.Mesh.Tracing.OTelProviders = []model.OTelTracingProvider{p}
	tr := &telemetry.Tracing{
		Providers: []*telemetry.ProviderRef{{Name: "otel-tracing"}}, RandomSamplingPercentage: wrapperspb.Double(100),
		CustomTags: map[string]*telemetry.Tracing_CustomTag{"my-attribute": {Type: &telemetry.Tracing_CustomTag_Literal{Literal: &telemetry.Tracing_Literal{Value: "default-value"}}}},
	}
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{{Name: "otel-demo", Namespace: "default", Spec: &telemetry.Telemetry{Tracing: []*telemetry.Tracing{tr}}}}
	return m
}

// The opentelemetry page's providers, as istiod's otelConfig sends them: gRPC to the
// collector's outbound|4317 cluster with its hostname as authority, or HTTP to
// <hostname>/v1/traces on outbound|4318 with the timeout and the header; the
// environment resource detector; service_name the proxy's service cluster. Goldens: the
// tracing block of the outbound HCM of each.
func TestTelemetryTracingOpenTelemetry(t *testing.T) {
	t.Parallel()
	const collector = "opentelemetry-collector.observability.svc.cluster.local"
	for name, p := range map[string]model.OTelTracingProvider{
		"tracing-otel-grpc": {Name: "otel-tracing", Service: collector, Port: 4317, EnvironmentDetector: true},
		"tracing-otel-http": {Name: "otel-tracing", Service: collector, Port: 4318, EnvironmentDetector: true, HTTP: &model.OTelHTTP{
			Path: "/v1/traces", Timeout: 5 * time.Second, HasTimeout: true, Headers: [][2]string{{"custom-header", "custom value"}},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := generate(t, otelTracingModel(p), "frontend-v1")
			tr := hcmOf(t, listenerHCMs(t, res), "0.0.0.0_8080").GetTracing()
			if tr.GetProvider().GetName() != otelTracer || tr.GetRandomSampling().GetValue() != 100 {
				t.Fatalf("tracing %v, want opentelemetry at 100 %%", tr)
			}
			var oc tracecfg.OpenTelemetryConfig
			if err := tr.GetProvider().GetTypedConfig().UnmarshalTo(&oc); err != nil {
				t.Fatal(err)
			}
			if oc.GetServiceName() != "frontend.default" {
				t.Errorf("service_name %q, want the proxy's service cluster", oc.GetServiceName())
			}
			if p.HTTP == nil && (oc.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "outbound|4317||"+collector || oc.GetGrpcService().GetEnvoyGrpc().GetAuthority() != collector) {
				t.Errorf("grpc_service %v", oc.GetGrpcService())
			}
			if p.HTTP != nil && (oc.GetHttpService().GetHttpUri().GetUri() != collector+"/v1/traces" || oc.GetHttpService().GetHttpUri().GetCluster() != "outbound|4318||"+collector) {
				t.Errorf("http_service %v", oc.GetHttpService())
			}
			b, err := protojson.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if b, err = json.MarshalIndent(v, "", "  "); err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, name, append(b, '\n'))
			// The whole config, which dataplane/proxy's contract test applies
			// (testdata/contract/xds-<name>-frontend-v1.json is a copy).
			testutil.Golden(t, name+"-frontend-v1", dumpJSON(t, res))
		})
	}
	// A collector service that does not exist: no tracing, as istiod's lookup failure.
	missing := otelTracingModel(model.OTelTracingProvider{Name: "otel-tracing", Service: "otel.nowhere.svc.cluster.local", Port: 4317})
	if tr := hcmOf(t, listenerHCMs(t, generate(t, missing, "frontend-v1")), "0.0.0.0_8080").GetTracing(); tr != nil {
		t.Errorf("collector service missing: tracing %v, want none", tr)
	}
}
