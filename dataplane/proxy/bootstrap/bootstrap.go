// Package bootstrap loads the proxy's Envoy bootstrap (JSON or YAML, from -c and
// --config-yaml) into envoy.config.bootstrap.v3.Bootstrap and refuses fields the proxy
// does not implement, naming them, as Envoy refuses configuration it cannot honour.
package bootstrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// Source says where the bootstrap comes from.
type Source struct {
	Path         string // optional: -c/--config-path
	YAML         string // optional: --config-yaml, merged over the file
	AllowUnknown bool   // optional: --allow-unknown-static-fields
}

// Load reads and parses the bootstrap. It does not check supported fields; see Check.
func Load(src Source) (*bootstrapv3.Bootstrap, error) {
	if src.Path == "" && src.YAML == "" {
		return nil, errors.New("at least one of --config-path or --config-yaml or Options::configProto() should be non-empty")
	}
	b := &bootstrapv3.Bootstrap{}
	if src.Path != "" {
		data, err := os.ReadFile(src.Path)
		if err != nil {
			return nil, fmt.Errorf("read bootstrap %s: %w", src.Path, err)
		}
		isJSON := strings.EqualFold(filepath.Ext(src.Path), ".json")
		if err := Parse(data, isJSON, src.AllowUnknown, b); err != nil {
			return nil, fmt.Errorf("parse bootstrap %s: %w", src.Path, err)
		}
	}
	if src.YAML != "" {
		over := &bootstrapv3.Bootstrap{}
		if err := Parse([]byte(src.YAML), false, src.AllowUnknown, over); err != nil {
			return nil, fmt.Errorf("parse --config-yaml: %w", err)
		}
		proto.Merge(b, over)
	}
	return b, nil
}

// Parse unmarshals JSON, or YAML converted to JSON, into b.
func Parse(data []byte, isJSON, allowUnknown bool, b *bootstrapv3.Bootstrap) error {
	if !isJSON {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("convert YAML to JSON: %w", err)
		}
		data = j
	}
	opts := protojson.UnmarshalOptions{DiscardUnknown: allowUnknown}
	if err := opts.Unmarshal(data, b); err != nil {
		return fmt.Errorf("unmarshal Bootstrap: %w", err)
	}
	return nil
}

var allow = fieldcheck.Allow{
	"envoy.config.bootstrap.v3.Bootstrap": {"node", "static_resources", "dynamic_resources", "admin",
		"application_log_config", "layered_runtime", "cluster_manager", "deferred_stat_options", "bootstrap_extensions",
		"stats_config", "tracing"}, // statsconfig.go, tracing.go
	"envoy.config.bootstrap.v3.Bootstrap.ApplicationLogConfig":           {"log_format"},
	"envoy.config.bootstrap.v3.Bootstrap.ApplicationLogConfig.LogFormat": {"json_format", "text_format"},
	"envoy.config.bootstrap.v3.LayeredRuntime":                           {"layers"},
	"envoy.config.bootstrap.v3.RuntimeLayer":                             {"name", "static_layer", "admin_layer"},
	"envoy.config.bootstrap.v3.ClusterManager":                           {"enable_deferred_cluster_creation"},
	"envoy.config.bootstrap.v3.Bootstrap.DeferredStatOptions":            {"enable_deferred_creation_stats"},
	"envoy.config.core.v3.TypedExtensionConfig":                          {"name", "typed_config"},
	"envoy.config.bootstrap.v3.Admin":                                    {"address", "access_log_path", "profile_path", "access_log"},
	"envoy.config.bootstrap.v3.Bootstrap.StaticResources":                {"listeners", "clusters"},
	"envoy.config.bootstrap.v3.Bootstrap.DynamicResources":               {"lds_config", "cds_config", "ads_config"},
	"envoy.config.core.v3.ConfigSource":                                  {"ads", "resource_api_version", "initial_fetch_timeout"},
	"envoy.config.core.v3.ApiConfigSource":                               {"api_type", "transport_api_version", "grpc_services", "set_node_on_first_message_only"},
	"envoy.config.core.v3.GrpcService":                                   {"envoy_grpc"},
	"envoy.config.core.v3.GrpcService.EnvoyGrpc":                         {"cluster_name"},
	"envoy.config.core.v3.Address":                                       {"socket_address"},
	"envoy.config.core.v3.SocketAddress":                                 {"address", "port_value", "protocol"},
}.Merge(statsConfigAllow).Merge(tracingAllow)

// Check validates b (ValidateAll) and refuses fields the proxy does not implement outside
// the static listeners and clusters, which their own compilers check.
func Check(b *bootstrapv3.Bootstrap) error {
	if err := b.ValidateAll(); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := allow.Check(b); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if ads := b.GetDynamicResources().GetAdsConfig(); ads != nil {
		if t := ads.GetApiType(); t != corev3.ApiConfigSource_GRPC && t != corev3.ApiConfigSource_DELTA_GRPC {
			return fmt.Errorf("bootstrap: dynamic_resources.ads_config.api_type: %s is not supported, only GRPC and DELTA_GRPC", t)
		}
		if len(ads.GetGrpcServices()) != 1 {
			return errors.New("bootstrap: dynamic_resources.ads_config.grpc_services: exactly one envoy_grpc service is required")
		}
	}
	for _, cs := range []*corev3.ConfigSource{b.GetDynamicResources().GetLdsConfig(), b.GetDynamicResources().GetCdsConfig()} {
		if cs != nil && cs.GetAds() == nil {
			return errors.New("bootstrap: dynamic_resources: lds_config and cds_config must use ads")
		}
		if cs != nil && b.GetDynamicResources().GetAdsConfig() == nil {
			return errors.New("bootstrap: dynamic_resources.ads_config: required when lds_config or cds_config uses ads")
		}
	}
	for i, al := range b.GetAdmin().GetAccessLog() {
		if err := checkDevNull(al); err != nil {
			return fmt.Errorf("bootstrap: admin.access_log[%d]: %w", i, err)
		}
	}
	if p := b.GetAdmin().GetAccessLogPath(); p != "" && p != os.DevNull { //nolint:staticcheck // Envoy still honours the deprecated access_log_path, so the stand-in must too
		return errors.New("bootstrap: admin.access_log_path: only /dev/null is supported (the admin API writes no access log)")
	}
	if err := checkExtensions(b); err != nil {
		return err
	}
	if _, err := StatsConfig(b); err != nil {
		return err
	}
	if b.GetAdmin().GetAddress() != nil && b.GetAdmin().GetAddress().GetSocketAddress() == nil {
		return errors.New("bootstrap: admin.address: only socket_address is supported")
	}
	return nil
}

// checkDevNull accepts an access logger only when it discards everything: a file logger
// to /dev/null, as Istio's bootstrap configures for the admin API. Anything else would be
// silently ignored, so it is refused.
func checkDevNull(al *accesslogv3.AccessLog) error {
	tc := al.GetTypedConfig()
	var f filev3.FileAccessLog
	if tc == nil || tc.MessageName() != f.ProtoReflect().Descriptor().FullName() {
		return fmt.Errorf("only envoy.access_loggers.file to /dev/null is supported, got %s", al.GetName())
	}
	if err := tc.UnmarshalTo(&f); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if f.GetPath() != os.DevNull || al.GetFilter() != nil {
		return errors.New("only envoy.access_loggers.file to /dev/null is supported")
	}
	return nil
}

// XDSCluster returns the name of the cluster ADS connects to, or "" without ADS.
func XDSCluster(b *bootstrapv3.Bootstrap) string {
	ads := b.GetDynamicResources().GetAdsConfig()
	if ads == nil || len(ads.GetGrpcServices()) == 0 {
		return ""
	}
	return ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
}
