package model

// MeshTracing is the tracing part of Istio's MeshConfig as a lab reads it: the switch
// (enableTracing), the sampling percentage proxies fall back to
// (defaultConfig.tracing.sampling) and the extension providers a Telemetry's tracing may
// name, of which meshlab's proxies have Zipkin's.
type MeshTracing struct {
	// Off is enableTracing: false (Istio's default is true).
	Off bool
	// Sampling is defaultConfig.tracing.sampling, in percent; 0: unset, Istio's
	// PILOT_TRACE_SAMPLING default (DefaultTraceSampling) applies.
	Sampling float64
	// Providers are the extensionProviders with a zipkin tracer, in the order written.
	Providers []ZipkinProvider
	// OTelProviders are those with an opentelemetry tracer (tracing_otel.go).
	OTelProviders []OTelTracingProvider
	// Default is defaultConfig.tracing beyond its sampling: what istiod's legacy
	// MeshConfig tracing (no Telemetry tracing applies) and pilot-agent's bootstrap read
	// (tracing_default.go in controlplane/xds).
	Default ProxyTracing
}

// ProxyTracing is ProxyConfig.tracing (MeshConfig's defaultConfig.tracing) as a lab
// honours it.
type ProxyTracing struct {
	// Sampling is sampling, in percent; 0: unset (istiod's PILOT_TRACE_SAMPLING). The
	// mesh's is MeshTracing.Sampling (For fills it in).
	Sampling float64
	// ZipkinAddress is zipkin.address (host:port): pilot-agent puts Envoy's Zipkin tracer
	// in the bootstrap, reporting to a STRICT_DNS cluster "zipkin" of that address; ""
	// for none (Istio's default install sets no tracer).
	ZipkinAddress string
	// MaxPathTagLength is maxPathTagLength (0: Envoy's 256).
	MaxPathTagLength uint32
	// NoIstioTags is enableIstioTags: false (Istio's default is true).
	NoIstioTags bool
	// CustomTags are customTags, by tag name.
	CustomTags map[string]ProxyTracingTag
}

// ProxyTracingTag is one of ProxyConfig.tracing's customTags: a literal value, an
// environment variable or a request header (with its default value).
type ProxyTracingTag struct {
	Literal     string
	Environment string
	Header      string
	Default     string
}

// For is the tracing of pod's proxy config: its proxy.istio.io/config annotation's
// tracing when it has one (SidecarSpec.Tracing), else the mesh's defaultConfig.tracing.
// Istio's injector merges the annotation over defaultConfig field by field at the top
// level (mesh.MergeProxyConfig: jsonpb sets each field the YAML names), so an annotation's
// tracing replaces the mesh's whole: what it leaves out is unset, not inherited.
// pilot-agent writes the bootstrap from it and sends it to istiod in the node's metadata
// (PROXY_CONFIG), whose ProxyConfigOrDefault then reads it for the HCMs' tracing.
func (t *MeshTracing) For(pod *Pod) ProxyTracing {
	if pod != nil && pod.Sidecar.Tracing != nil {
		return *pod.Sidecar.Tracing
	}
	d := t.Default
	d.Sampling = t.Sampling
	return d
}

// DefaultTraceSampling is istiod's PILOT_TRACE_SAMPLING default, in percent.
const DefaultTraceSampling = 1.0

// ZipkinProvider is an extension provider with a zipkin tracer: where its spans go.
type ZipkinProvider struct {
	Name    string
	Service string // the collector's host (a service's name, FQDN or short)
	Port    uint16
	// MaxTagLength bounds the http.url tag (0: Envoy's 256); Path is the collector's
	// endpoint ("": /api/v2/spans).
	MaxTagLength uint32
	Path         string
	// TraceID64 is enable64bitTraceId: new traces get 64-bit ids (Istio's default 128).
	TraceID64 bool
}

// Provider returns the zipkin provider named name.
func (t MeshTracing) Provider(name string) (ZipkinProvider, bool) {
	for _, p := range t.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return ZipkinProvider{}, false
}
