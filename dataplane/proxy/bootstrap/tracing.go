package bootstrap

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
)

// tracingAllow is the bootstrap's tracing: the HTTP tracer an HTTP connection manager
// with a tracing block and no provider of its own uses (Envoy's bootstrap tracing.http,
// which pilot-agent writes from defaultConfig.tracing.zipkin).
var tracingAllow = fieldcheck.Allow{
	"envoy.config.trace.v3.Tracing":      {"http"},
	"envoy.config.trace.v3.Tracing.Http": {"name", "typed_config"},
}

// Tracer compiles the bootstrap's tracing.http, nil without one. Only Envoy's Zipkin
// tracer exists here; its collector cluster must be one of the bootstrap's static
// clusters, as Envoy checks it when it makes the tracer (pilot-agent's "zipkin").
func Tracer(b *bootstrapv3.Bootstrap, hasCluster func(string) bool) (*tracing.Zipkin, error) {
	t := b.GetTracing() //nolint:staticcheck // deprecated in Envoy's API, still what Istio's bootstrap writes and Envoy honours
	if t == nil {
		return nil, nil
	}
	if err := tracingAllow.Check(t); err != nil {
		return nil, fmt.Errorf("bootstrap: tracing.%w", err)
	}
	h := t.GetHttp()
	if h == nil {
		return nil, nil
	}
	if h.GetName() != tracing.ZipkinName {
		return nil, fmt.Errorf("bootstrap: tracing.http.name: %q is not a tracer of meshlab proxy (it has %s)", h.GetName(), tracing.ZipkinName)
	}
	z, err := tracing.CompileZipkin(h.GetTypedConfig())
	if err != nil {
		return nil, fmt.Errorf("bootstrap: tracing.http.%w", err)
	}
	if !hasCluster(z.Cluster) {
		return nil, fmt.Errorf("bootstrap: tracing.http.typed_config: collector_cluster %q is not a static cluster of the bootstrap", z.Cluster)
	}
	return z, nil
}
