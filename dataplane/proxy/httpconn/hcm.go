package httpconn

import (
	"errors"
	"fmt"

	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// Names of the HCM and the router filter.
const (
	FilterName       = "envoy.filters.network.http_connection_manager"
	RouterFilterName = "envoy.filters.http.router"
)

var hcmAllow = fieldcheck.Allow{
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager": {
		"codec_type", "stat_prefix", "rds", "route_config", "http_filters", "server_name", "server_header_transformation",
	},
	"envoy.extensions.filters.network.http_connection_manager.v3.Rds":        {"config_source", "route_config_name"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter": {"name", "typed_config"},
}.Merge(cluster.ConfigSourceAllow)

var routerAllow = fieldcheck.Allow{"envoy.extensions.filters.http.router.v3.Router": {}}

// ServerHeader is the HCM's server_header_transformation.
type ServerHeader int

// Server header transformations, as Envoy's enum.
const (
	ServerHeaderOverwrite ServerHeader = iota
	ServerHeaderAppendIfAbsent
	ServerHeaderPassThrough
)

// Config is a compiled HTTP connection manager.
type Config struct {
	StatPrefix   string
	RDSName      string      // set when routes come over RDS
	Inline       *RouteTable // set for an inline route_config
	ServerName   string      // "envoy" unless server_name is set
	ServerHeader ServerHeader
}

// Compile validates an HCM typed_config and compiles it. Only the router HTTP filter and
// the HTTP/1.1 codec (AUTO or HTTP1) are supported.
func Compile(a *anypb.Any) (*Config, error) {
	var h hcmv3.HttpConnectionManager
	if err := a.UnmarshalTo(&h); err != nil {
		return nil, fmt.Errorf("unpack HttpConnectionManager: %w", err)
	}
	if err := h.ValidateAll(); err != nil {
		return nil, err
	}
	if err := hcmAllow.Check(&h); err != nil {
		return nil, err
	}
	switch h.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP1:
	default:
		return nil, fmt.Errorf("codec_type: unsupported codec %s", h.GetCodecType())
	}
	cfg := &Config{StatPrefix: h.GetStatPrefix(), ServerName: "envoy", ServerHeader: ServerHeader(h.GetServerHeaderTransformation())}
	if h.GetServerName() != "" {
		cfg.ServerName = h.GetServerName()
	}
	switch {
	case h.GetRds() != nil:
		if h.GetRds().GetConfigSource().GetAds() == nil {
			return nil, errors.New("rds.config_source: only ads config sources are supported")
		}
		cfg.RDSName = h.GetRds().GetRouteConfigName()
	case h.GetRouteConfig() != nil:
		t, err := CompileRoutes(h.GetRouteConfig())
		if err != nil {
			return nil, fmt.Errorf("route_config: %w", err)
		}
		cfg.Inline = t
	default:
		return nil, errors.New("route_specifier: only rds and route_config are supported")
	}
	if len(h.GetHttpFilters()) == 0 {
		return nil, errors.New("http_filters: the router filter is required")
	}
	for i, f := range h.GetHttpFilters() {
		if err := checkHTTPFilter(f); err != nil {
			return nil, fmt.Errorf("http_filters[%d]: %w", i, err)
		}
		if i != len(h.GetHttpFilters())-1 {
			return nil, fmt.Errorf("http_filters[%d]: only the router filter is supported", i)
		}
	}
	return cfg, nil
}

func checkHTTPFilter(f *hcmv3.HttpFilter) error {
	tc := f.GetTypedConfig()
	if tc == nil {
		if f.GetName() == RouterFilterName {
			return nil
		}
		return fmt.Errorf("name: unsupported http filter %s", f.GetName())
	}
	var r routerv3.Router
	if tc.MessageName() != r.ProtoReflect().Descriptor().FullName() {
		return fmt.Errorf("typed_config: unsupported type %s", tc.MessageName())
	}
	if err := tc.UnmarshalTo(&r); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if err := r.ValidateAll(); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if err := routerAllow.Check(&r); err != nil {
		return fmt.Errorf("typed_config.%w", err)
	}
	return nil
}
