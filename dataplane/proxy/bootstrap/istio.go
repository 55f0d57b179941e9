package bootstrap

import (
	"errors"
	"fmt"
	"strings"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/envoylog"
)

// Why each accepted bootstrap knob with no behaviour of its own here has no observable
// effect (Envoy's semantics are kept; nothing is ignored silently):
//
//   - layered_runtime: Istio's static layer sets Envoy runtime flags. The ones it sets
//     (allowing the deprecated use_original_dst, coalesced LB rebuilds, heap accounting,
//     not rejecting paths with a fragment, a larger RE2 program size) either tune Envoy
//     internals or already match the proxy's behaviour (Go's regexp has no program size
//     limit; Go's parser keeps a fragment out of the path). The admin layer only takes
//     /runtime_modify, which the admin API does not serve.
//   - cluster_manager.enable_deferred_cluster_creation: Envoy builds a cluster's worker
//     state on first use; the proxy builds none per worker.
//   - deferred_stat_options.enable_deferred_creation_stats: Envoy creates some stat
//     groups lazily, which changes memory only; the stats a scrape sees are the same once
//     traffic flowed.
//   - bootstrap_extensions envoy.bootstrap.internal_listener: enables Envoy's internal
//     listeners, which no sidecar listener uses (an internal address is refused by the
//     listener compiler); metadata_discovery (istio.workload.BootstrapExtension): the
//     workload metadata source of istio-proxy's peer metadata in ambient mode; the
//     proxy subscribes to istio.workload.Workload over its ADS stream
//     (MetadataDiscovery) and the peer filters' workload_discovery reads it.

// bootstrapExtensions are the accepted bootstrap_extensions by name, with their config
// type (the type a TypedStruct names, or the Any's own type).
var bootstrapExtensions = map[string]string{
	"envoy.bootstrap.internal_listener": "envoy.extensions.bootstrap.internal_listener.v3.InternalListener",
	"metadata_discovery":                "istio.workload.BootstrapExtension",
}

func checkExtensions(b *bootstrapv3.Bootstrap) error {
	for i, ext := range b.GetBootstrapExtensions() {
		want, ok := bootstrapExtensions[ext.GetName()]
		if !ok {
			return fmt.Errorf("bootstrap: bootstrap_extensions[%d].name: unsupported extension %s", i, ext.GetName())
		}
		if got := configType(ext.GetTypedConfig()); got != want {
			return fmt.Errorf("bootstrap: bootstrap_extensions[%d].typed_config: type %s, want %s", i, got, want)
		}
	}
	for i, l := range b.GetLayeredRuntime().GetLayers() {
		if l.GetStaticLayer() == nil && l.GetAdminLayer() == nil {
			return fmt.Errorf("bootstrap: layered_runtime.layers[%d]: only static_layer and admin_layer are supported", i)
		}
	}
	return nil
}

// LogFormat returns the application log format the bootstrap sets, nil for none. Envoy
// refuses a bootstrap format together with a --log-format other than its default
// (cliFormatSet).
func LogFormat(b *bootstrapv3.Bootstrap, cliFormatSet bool) (*envoylog.Format, error) {
	lf := b.GetApplicationLogConfig().GetLogFormat()
	if lf == nil {
		return nil, nil
	}
	if cliFormatSet {
		return nil, errors.New("bootstrap: application_log_config.log_format: only one of ApplicationLogConfig.log_format or CLI option --log-format can be specified")
	}
	switch {
	case lf.GetJsonFormat() != nil:
		f, err := envoylog.ParseJSONFormat(lf.GetJsonFormat().AsMap())
		if err != nil {
			return nil, fmt.Errorf("bootstrap: application_log_config.log_format.%w", err)
		}
		return f, nil
	case lf.GetTextFormat() != "":
		f, err := envoylog.ParseTextFormat(lf.GetTextFormat())
		if err != nil {
			return nil, fmt.Errorf("bootstrap: application_log_config.log_format.text_format: %w", err)
		}
		return f, nil
	}
	return nil, nil
}

// configType returns the config type of an extension's typed_config: the type a
// udpa.type.v1 or xds.type.v3 TypedStruct wraps, or the Any's own type.
func configType(a *anypb.Any) string {
	if a == nil {
		return ""
	}
	var url string
	switch a.MessageName() {
	case "udpa.type.v1.TypedStruct":
		var ts udpav1.TypedStruct
		if a.UnmarshalTo(&ts) == nil {
			url = ts.GetTypeUrl()
		}
	case "xds.type.v3.TypedStruct":
		var ts xdstypev3.TypedStruct
		if a.UnmarshalTo(&ts) == nil {
			url = ts.GetTypeUrl()
		}
	default:
		return string(a.MessageName())
	}
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		url = url[i+1:]
	}
	return url
}

// MetadataDiscovery reports whether the bootstrap has istio-proxy's metadata discovery
// extension (istio.workload.BootstrapExtension, a waypoint's), whose workloads the proxy
// then subscribes to over ADS.
func MetadataDiscovery(b *bootstrapv3.Bootstrap) bool {
	for _, ext := range b.GetBootstrapExtensions() {
		if configType(ext.GetTypedConfig()) == bootstrapExtensions["metadata_discovery"] {
			return true
		}
	}
	return false
}
