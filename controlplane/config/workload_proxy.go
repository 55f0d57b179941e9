package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshlab/meshlab/controlplane/model"
)

// maxConcurrency bounds a proxy's worker threads: a lab runs many proxies on one machine.
const maxConcurrency = 64

// dataPlanes are the choices of spec.sidecar.dataPlane.
var dataPlanes = []string{"envoy", "meshlab"}

// proxySettings checks the sidecar settings that live in the proxy's command line or
// bootstrap (a change of them starts a new proxy epoch in a running lab) and sets them
// in out.
func proxySettings(in *SidecarConfig, out *model.SidecarSpec, p problems) {
	if in.Concurrency < 0 || in.Concurrency > maxConcurrency {
		p.addf("spec.sidecar.concurrency", "%d is out of range 0-%d", in.Concurrency, maxConcurrency)
	}
	out.Concurrency = in.Concurrency
	out.DrainDuration = duration(p, "spec.sidecar.drainDuration", in.DrainDuration)
	out.ParentShutdownDuration = duration(p, "spec.sidecar.parentShutdownDuration", in.ParentShutdownDuration)
	if in.DataPlane != "" && in.DataPlane != dataPlanes[0] && in.DataPlane != dataPlanes[1] {
		p.addf("spec.sidecar.dataPlane", "%q is not one of %v", in.DataPlane, dataPlanes)
	}
	if in.DataPlane == "meshlab" && in.ProxyPath != "" {
		p.addf("spec.sidecar.proxyPath", "names an Envoy binary, but dataPlane is meshlab (the built-in proxy)")
	}
	out.DataPlane = in.DataPlane
	if in.BootstrapOverride != nil {
		out.BootstrapOverride = bootstrapOverride(p, in.BootstrapOverride)
	}
}

// duration parses a non-negative Go duration; "" is 0.
func duration(p problems, field, s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.addf(field, "%q is not a non-negative duration such as \"45s\"", s)
		return 0
	}
	return d
}

// bootstrapOverride checks a Bootstrap fragment with Envoy's proto types (unknown fields
// are errors naming the field) and returns it as compact JSON for the agent.
func bootstrapOverride(p problems, v map[string]any) string {
	const field = "spec.sidecar.bootstrapOverride"
	js, err := json.Marshal(v)
	if err != nil {
		p.addf(field, "cannot encode as JSON: %v", err)
		return ""
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		p.addf(field, "not a valid envoy.config.bootstrap.v3.Bootstrap fragment: %v", err)
		return ""
	}
	return string(js)
}

// startupCalls checks the app's startup call URLs as its upstreams are checked.
func startupCalls(urls []string, p problems) []string {
	checkURLs("spec.app.startupCalls", urls, p)
	return urls
}

// checkURLs reports every entry of urls (the list at field) that is not an absolute
// http:// or https:// URL.
func checkURLs(field string, urls []string, p problems) {
	for i, u := range urls {
		f := fmt.Sprintf("%s[%d]", field, i)
		parsed, err := url.Parse(u)
		switch {
		case err != nil:
			p.addf(f, "%q is not a URL: %v", u, err)
		case parsed.Scheme != "http" && parsed.Scheme != "https":
			p.addf(f, "%q is not an http:// or https:// URL", u)
		case parsed.Host == "":
			p.addf(f, "%q has no host", u)
		}
	}
}
