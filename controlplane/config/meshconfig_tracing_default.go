package config

import (
	"fmt"
	"net"
	"strconv"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// proxyTracingPaths are the defaultConfig.tracing fields beyond sampling a lab honours:
// the Zipkin tracer pilot-agent puts in every proxy's bootstrap (zipkin.address), and
// what istiod's legacy MeshConfig tracing writes on every HTTP connection manager when
// no Telemetry tracing applies (maxPathTagLength, enableIstioTags, customTags). The
// other tracers (lightstep, datadog, stackdriver, openCensusAgent) and tlsSettings are
// refused by the field walk, naming the field.
func proxyTracingPaths() string {
	return "defaultConfig.tracing.zipkin defaultConfig.tracing.zipkin.address defaultConfig.tracing.maxPathTagLength " +
		"defaultConfig.tracing.enableIstioTags defaultConfig.tracing.customTags " +
		expand("defaultConfig.tracing.customTags.*", "literal literal.value environment environment.name environment.defaultValue header header.name header.defaultValue")
}

// validateProxyTracing checks defaultConfig.tracing as Istio's ValidateMeshConfig does
// (ValidateProxyAddress for the tracer's address, one kind per custom tag).
func validateProxyTracing(mc *meshv1alpha1.MeshConfig, p problems) {
	checkProxyTracing(mc.GetDefaultConfig().GetTracing(), "spec.defaultConfig.tracing", p)
}

// checkProxyTracing checks a ProxyConfig's tracing t (at field): the mesh's
// defaultConfig.tracing or a pod's proxy.istio.io/config tracing.
func checkProxyTracing(t *meshv1alpha1.Tracing, field string, p problems) {
	if z := t.GetZipkin(); z != nil {
		f := field + ".zipkin.address"
		host, port, err := net.SplitHostPort(z.GetAddress())
		switch {
		case z.GetAddress() == "":
			p.addf(f, "is required (host:port of the Zipkin collector, e.g. zipkin.istio-system:9411)")
		case err != nil || host == "":
			p.addf(f, "%q is not host:port (e.g. zipkin.istio-system:9411)", z.GetAddress())
		default:
			n, err := strconv.ParseInt(port, 10, 64)
			if err != nil {
				p.addf(f, "port %q is not a number", port)
			} else if msg := checkPort(n); msg != "" {
				p.addf(f, "port %s", msg)
			}
		}
	}
	for name, ct := range t.GetCustomTags() {
		f := fmt.Sprintf("%s.customTags[%s]", field, name)
		switch {
		case ct.GetLiteral() != nil, ct.GetEnvironment() != nil, ct.GetHeader() != nil:
			if ct.GetEnvironment() != nil && ct.GetEnvironment().GetName() == "" {
				p.addf(f+".environment.name", "is required")
			}
			if ct.GetHeader() != nil && ct.GetHeader().GetName() == "" {
				p.addf(f+".header.name", "is required")
			}
		default:
			p.addf(f, "needs one of literal, environment or header")
		}
	}
}

// proxyTracingModel is defaultConfig.tracing beyond its sampling.
func proxyTracingModel(mc *meshv1alpha1.MeshConfig) model.ProxyTracing {
	return proxyTracingOf(mc.GetDefaultConfig().GetTracing())
}

// proxyTracingOf is a ProxyConfig's tracing t beyond its sampling.
func proxyTracingOf(t *meshv1alpha1.Tracing) model.ProxyTracing {
	out := model.ProxyTracing{
		ZipkinAddress:    t.GetZipkin().GetAddress(),
		MaxPathTagLength: t.GetMaxPathTagLength(),
		NoIstioTags:      t.GetEnableIstioTags() != nil && !t.GetEnableIstioTags().GetValue(),
	}
	for name, ct := range t.GetCustomTags() {
		if out.CustomTags == nil {
			out.CustomTags = map[string]model.ProxyTracingTag{}
		}
		tag := model.ProxyTracingTag{Literal: ct.GetLiteral().GetValue()}
		if e := ct.GetEnvironment(); e != nil {
			tag.Environment, tag.Default = e.GetName(), e.GetDefaultValue()
		}
		if h := ct.GetHeader(); h != nil {
			tag.Header, tag.Default = h.GetName(), h.GetDefaultValue()
		}
		out.CustomTags[name] = tag
	}
	return out
}
