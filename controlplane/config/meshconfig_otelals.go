package config

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The MeshConfig's OpenTelemetry access log providers (extensionProviders with
// envoyOtelAls, the otel-provider page's) and defaultProviders.accessLogging: what a
// Telemetry's accessLogging may name besides the built-in envoy, and what the proxies log
// to when no Telemetry's accessLogging applies to them. istiod sends such a provider as
// Envoy's OpenTelemetry access logger to the service's outbound cluster
// (controlplane/xds/accesslog.go).

func meshAccessLogProviderPaths() string {
	return "extensionProviders.envoyOtelAls " +
		expand("extensionProviders.envoyOtelAls", "service port logName logFormat") + " " +
		expand("extensionProviders.envoyOtelAls.logFormat", "text labels") + " " +
		"defaultProviders defaultProviders.accessLogging"
}

// validateMeshAccessLogProviders checks the envoyOtelAls providers as Istio's mesh
// validation does (a service and a port) and that defaultProviders.accessLogging names
// providers the mesh has.
func validateMeshAccessLogProviders(mc *meshv1alpha1.MeshConfig, p problems) {
	names := map[string]bool{"envoy": true}
	for i, ep := range mc.GetExtensionProviders() {
		names[ep.GetName()] = true
		a := ep.GetEnvoyOtelAls()
		if a == nil {
			continue
		}
		f := fmt.Sprintf("spec.extensionProviders[%d].envoyOtelAls", i)
		if a.GetService() == "" {
			p.addf(f+".service", "is required (the collector's service, e.g. opentelemetry-collector.istio-system.svc.cluster.local)")
		}
		if msg := checkPort(int64(a.GetPort())); msg != "" {
			p.addf(f+".port", "%s", msg)
		}
	}
	for i, n := range mc.GetDefaultProviders().GetAccessLogging() {
		if !names[n] {
			p.addf(fmt.Sprintf("spec.defaultProviders.accessLogging[%d]", i), "%q is not a provider of the mesh config (extensionProviders names %s)", n, providerNames(mc))
		}
	}
}

func providerNames(mc *meshv1alpha1.MeshConfig) string {
	s := `"envoy" (built in)`
	for _, ep := range mc.GetExtensionProviders() {
		s += fmt.Sprintf(", %q", ep.GetName())
	}
	return s
}

// accessLogProvidersModel fills mesh's access log providers from a MeshConfig object.
func accessLogProvidersModel(o *Object, mesh *model.MeshConfig) {
	mc := o.MeshConfig
	mesh.OTelAccessLogProviders = nil
	for _, ep := range mc.GetExtensionProviders() {
		if a := ep.GetEnvoyOtelAls(); a != nil {
			mesh.OTelAccessLogProviders = append(mesh.OTelAccessLogProviders, model.OTelAccessLogProvider{
				Name: ep.GetName(), Service: a.GetService(), Port: uint16(a.GetPort()), //nolint:gosec // checked by validateMeshAccessLogProviders
				LogName: a.GetLogName(), Format: a.GetLogFormat().GetText(),
				Labels: labelFormats(a.GetLogFormat().GetLabels().GetFields()),
			})
		}
	}
	mesh.DefaultAccessLogProviders = append([]string(nil), mc.GetDefaultProviders().GetAccessLogging()...)
}

// labelFormats are logFormat.labels as format strings (istiod takes each value's
// string).
func labelFormats(f map[string]*structpb.Value) map[string]string {
	if len(f) == 0 {
		return nil
	}
	out := make(map[string]string, len(f))
	for k, v := range f {
		out[k] = v.GetStringValue()
	}
	return out
}
