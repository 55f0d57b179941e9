package httpconn

import (
	"errors"
	"fmt"
	"strings"
	"time"

	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/fault"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/jwtauthn"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/lua"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/rbac"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/setstate"
)

// Names of the HCM and the router filter.
const (
	FilterName       = "envoy.filters.network.http_connection_manager"
	RouterFilterName = "envoy.filters.http.router"
)

var hcmAllow = fieldcheck.Allow{
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager": {
		"codec_type", "stat_prefix", "rds", "route_config", "http_filters", "server_name", "server_header_transformation", "access_log",
		"forward_client_cert_details", "set_current_client_cert_details", "drain_timeout", "http2_protocol_options",
		"stream_idle_timeout", "use_remote_address", "proxy_100_continue", "upgrade_configs", "normalize_path",
		"merge_slashes", "path_with_escaped_slashes_action", "request_id_extension", "preserve_external_request_id", "tracing",
		"generate_request_id", "http_protocol_options", "common_http_protocol_options",
	},
	"envoy.config.core.v3.HttpProtocolOptions": {"idle_timeout", "headers_with_underscores_action"},
	// accept_http_10: the codec serves HTTP/1.0 requests (Istio sets it when HTTP/1.0 is
	// enabled); that is already the codec's behaviour, also without it.
	"envoy.config.core.v3.Http1ProtocolOptions":                                                       {"accept_http_10"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.UpgradeConfig": {"upgrade_type", "enabled"},
	// allow_connect: the HTTP/2 codec takes CONNECT requests (istiod's connect_terminate);
	// connection_keepalive: PINGs on an idle connection (keepalive.go).
	"envoy.config.core.v3.Http2ProtocolOptions": {"max_concurrent_streams", "allow_connect", "connection_keepalive"},
	"envoy.config.core.v3.KeepaliveSettings":    {"interval", "timeout"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.SetCurrentClientCertDetails": {"subject", "uri", "dns"},
	"envoy.extensions.filters.network.http_connection_manager.v3.Rds":                                               {"config_source", "route_config_name"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter":                                        {"name", "typed_config"},
}.Merge(cluster.ConfigSourceAllow, requestIDAllow, tracingAllow)

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
	// serverValues is ServerName as the Server header's values, made once by Compile
	// and shared by every response (see sharedValues).
	serverValues []string
	Filters      []Filter // the HTTP filters before the router, in filter chain order
	AccessLogs   []*accesslog.Logger
	XFCC         XFCC // forward_client_cert_details
	Codec        Codec
	// MaxConcurrentStreams is http2_protocol_options.max_concurrent_streams (0: Envoy's
	// default, 2^31-1).
	MaxConcurrentStreams uint32
	// AllowConnect is http2_protocol_options.allow_connect: without it an HTTP/2 CONNECT
	// stream is reset, as Envoy's codec refuses it.
	AllowConnect bool
	// KeepaliveInterval and KeepaliveTimeout are http2_protocol_options.connection_keepalive:
	// a PING after Interval with nothing received, the connection closed when its ack
	// does not come within Timeout (Envoy's default 15 s when unset); 0: no keepalive.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// DrainTimeout is the HCM's drain_timeout (0: DefaultDrainTimeout).
	DrainTimeout time.Duration
	// UseRemoteAddress is use_remote_address: the connection's peer is the client
	// (appended to x-forwarded-for, x-envoy-external-address set, internal headers removed).
	UseRemoteAddress bool
	// Path is normalize_path, merge_slashes and path_with_escaped_slashes_action.
	Path PathNormalization
	// Upgrades lists the upgrade types (lower case) upgrade_configs enables, e.g.
	// "websocket"; a route's upgrade_configs may override each.
	Upgrades map[string]bool
	// RequestID is request_id_extension and preserve_external_request_id.
	RequestID RequestID
	// Tracing is the tracing block (provider unset), nil without tracing.
	Tracing *Tracing
	// ALPN is the istio.alpn filter, nil without it.
	ALPN *ALPNOverride
	// GRPCStats is the grpc_stats filter, nil without it.
	GRPCStats *GRPCStats
	// CORS reports whether the cors filter is present: routes' CORS policies apply.
	CORS bool
	// Peer is istio-proxy's peer_metadata filter (istio.metadata_exchange), nil
	// without it.
	Peer *peer.HTTPFilter
	// IstioStats is the istio.stats filter (Istio's standard metrics), nil without it.
	IstioStats *istiostats.Config
	// IdleTimeout is common_http_protocol_options.idle_timeout: a connection with no
	// request in flight for this long is closed (0: never; Envoy's default of 1h for an
	// unset field is not applied, keeping the per-request path free of timers).
	IdleTimeout time.Duration
	// Underscores is common_http_protocol_options.headers_with_underscores_action.
	Underscores UnderscoreAction
	// StreamIdleTimeout is stream_idle_timeout (Envoy's default 5m; 0 disables): a
	// stream that moves no byte for this long gets a 408, or is reset once its response
	// started.
	StreamIdleTimeout time.Duration
}

// DefaultStreamIdleTimeout is Envoy's stream_idle_timeout when the field is unset.
const DefaultStreamIdleTimeout = 5 * time.Minute

// UnderscoreAction is what the HCM does with a request header whose name has an
// underscore, as Envoy's enum.
type UnderscoreAction int

// Actions on header names with underscores.
const (
	UnderscoresAllow UnderscoreAction = iota
	UnderscoresReject
	UnderscoresDrop
)

// Codec is the HCM's codec_type.
type Codec int

// Codecs, as Envoy's enum: AUTO picks HTTP/2 by ALPN or the preface.
const (
	CodecAuto Codec = iota
	CodecHTTP1
	CodecHTTP2
)

// Filter is one HTTP filter before the router: an envoy.filters.http.fault (Fault set)
// or an envoy.filters.http.rbac (RBAC set).
type Filter struct {
	Name  string // the filter's name, the key of typed_per_filter_config overrides
	Fault *fault.Config
	RBAC  *rbac.HTTPConfig
	JWT   *jwtauthn.Config // envoy.filters.http.jwt_authn (jwtauthn.go)
	// SetState is envoy.filters.http.set_filter_state (connect.go).
	SetState *setstate.Config
	// Lua is envoy.filters.http.lua (lua.go).
	Lua *lua.Config
}

// Compile validates an HCM typed_config and compiles it. Only the fault, rbac and router
// HTTP filters and the AUTO, HTTP1 and HTTP2 codecs are supported.
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
	cfg := &Config{StatPrefix: h.GetStatPrefix(), ServerName: "envoy", ServerHeader: ServerHeader(h.GetServerHeaderTransformation())}
	switch h.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO:
	case hcmv3.HttpConnectionManager_HTTP1:
		cfg.Codec = CodecHTTP1
	case hcmv3.HttpConnectionManager_HTTP2:
		cfg.Codec = CodecHTTP2
	default:
		return nil, fmt.Errorf("codec_type: unsupported codec %s", h.GetCodecType())
	}
	if v := h.GetHttp2ProtocolOptions().GetMaxConcurrentStreams(); v != nil {
		cfg.MaxConcurrentStreams = v.GetValue()
	}
	cfg.AllowConnect = h.GetHttp2ProtocolOptions().GetAllowConnect()
	if ka := h.GetHttp2ProtocolOptions().GetConnectionKeepalive(); ka != nil {
		cfg.KeepaliveInterval = ka.GetInterval().AsDuration()
		cfg.KeepaliveTimeout = 15 * time.Second
		if d := ka.GetTimeout(); d != nil {
			cfg.KeepaliveTimeout = d.AsDuration()
		}
	}
	if d := h.GetDrainTimeout(); d != nil {
		cfg.DrainTimeout = d.AsDuration()
	}
	if h.GetServerName() != "" {
		cfg.ServerName = h.GetServerName()
	}
	cfg.serverValues = sharedValues(cfg.ServerName)
	if err := cfg.compileStreamOptions(&h); err != nil {
		return nil, err
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
	if err := cfg.checkConnectRoutes(); err != nil {
		return nil, err
	}
	logs, err := accesslog.Compile(h.GetAccessLog())
	if err != nil {
		return nil, err
	}
	cfg.AccessLogs = logs
	cfg.XFCC = xfccFrom(&h)
	if len(h.GetHttpFilters()) == 0 {
		return nil, errors.New("http_filters: the router filter is required")
	}
	last := len(h.GetHttpFilters()) - 1
	for i, f := range h.GetHttpFilters() {
		if tc := f.GetTypedConfig(); tc != nil {
			handled, err := cfg.compileIstioFilter(tc)
			if err != nil {
				return nil, fmt.Errorf("http_filters[%d].%w", i, err)
			}
			if handled {
				if i == last {
					return nil, fmt.Errorf("http_filters[%d]: the last filter must be the router", i)
				}
				continue
			}
		}
		fc, err := compileHTTPFilter(f)
		if err != nil {
			return nil, fmt.Errorf("http_filters[%d]: %w", i, err)
		}
		switch {
		case i == last && fc != nil:
			return nil, fmt.Errorf("http_filters[%d]: the last filter must be the router", i)
		case i != last && fc == nil:
			return nil, fmt.Errorf("http_filters[%d]: the router must be the last filter", i)
		case fc != nil:
			fc.Name = f.GetName()
			cfg.Filters = append(cfg.Filters, *fc)
		}
	}
	return cfg, nil
}

// compileHTTPFilter returns the compiled fault or rbac filter, nil for the router, or an
// error for any other filter.
func compileHTTPFilter(f *hcmv3.HttpFilter) (*Filter, error) {
	tc := f.GetTypedConfig()
	if tc == nil {
		if f.GetName() == RouterFilterName {
			return nil, nil
		}
		return nil, fmt.Errorf("name: unsupported http filter %s", f.GetName())
	}
	var fp faultv3.HTTPFault
	if tc.MessageName() == fp.ProtoReflect().Descriptor().FullName() {
		c, err := fault.Compile(tc)
		if err != nil {
			return nil, fmt.Errorf("typed_config: %w", err)
		}
		return &Filter{Fault: c}, nil
	}
	if tc.MessageName() == jwtauthn.ConfigType {
		c, err := jwtauthn.Compile(tc)
		if err != nil {
			return nil, fmt.Errorf("typed_config.%w", err)
		}
		return &Filter{JWT: c}, nil
	}
	if tc.MessageName() == setstate.HTTPConfigType {
		c, err := setstate.CompileHTTP(tc)
		if err != nil {
			return nil, err
		}
		return &Filter{SetState: c}, nil
	}
	if tc.MessageName() == lua.ConfigType {
		c, err := lua.Compile(tc)
		if err != nil {
			return nil, err
		}
		return &Filter{Lua: c}, nil
	}
	if tc.MessageName() == rbac.HTTPConfigType {
		c, err := rbac.CompileHTTP(tc)
		if err != nil {
			return nil, fmt.Errorf("typed_config.%w", err)
		}
		return &Filter{RBAC: c}, nil
	}
	return nil, checkRouter(tc)
}

func checkRouter(tc *anypb.Any) error {
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

// compileStreamOptions compiles the HCM fields that shape each stream: idle timeout,
// 100-continue, upgrades, path normalization, the remote address, x-request-id, tracing.
func (cfg *Config) compileStreamOptions(h *hcmv3.HttpConnectionManager) error {
	// The proxy has no per-stream idle timer; 0 (disabled), which Istio sends on every
	// HCM, is exactly its behaviour. Any other value is refused rather than ignored.
	cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	if d := h.GetStreamIdleTimeout(); d != nil {
		cfg.StreamIdleTimeout = d.AsDuration()
	}
	// proxy_100_continue: either way the client that sent "Expect: 100-continue" gets a
	// 100 Continue before its body is forwarded and the final response afterwards. With
	// true Envoy relays the upstream's own 100; the proxy answers it itself when the
	// router asks for the body, which it does at once (Istio's retry policy buffers every
	// body), so only the timing of the 100 within the same round trip differs.
	_ = h.GetProxy_100Continue()
	cfg.UseRemoteAddress = h.GetUseRemoteAddress().GetValue()
	if d := h.GetCommonHttpProtocolOptions().GetIdleTimeout(); d != nil {
		cfg.IdleTimeout = d.AsDuration()
	}
	cfg.Underscores = UnderscoreAction(h.GetCommonHttpProtocolOptions().GetHeadersWithUnderscoresAction())
	cfg.Path.Normalize = h.GetNormalizePath().GetValue()
	cfg.Path.MergeSlashes = h.GetMergeSlashes()
	switch h.GetPathWithEscapedSlashesAction() {
	case hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT, hcmv3.HttpConnectionManager_KEEP_UNCHANGED:
	case hcmv3.HttpConnectionManager_REJECT_REQUEST:
		cfg.Path.EscapedSlashes = EscapedSlashesReject
	case hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT:
		cfg.Path.EscapedSlashes = EscapedSlashesRedirect
	case hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD:
		cfg.Path.EscapedSlashes = EscapedSlashesUnescape
	default:
		return fmt.Errorf("path_with_escaped_slashes_action: unknown action %s", h.GetPathWithEscapedSlashesAction())
	}
	for i, u := range h.GetUpgradeConfigs() {
		t := strings.ToLower(u.GetUpgradeType())
		if t != "websocket" && t != UpgradeConnect {
			return fmt.Errorf("upgrade_configs[%d].upgrade_type: only websocket and CONNECT upgrades are supported by meshlab proxy, not %q", i, u.GetUpgradeType())
		}
		if cfg.Upgrades == nil {
			cfg.Upgrades = map[string]bool{}
		}
		cfg.Upgrades[t] = u.GetEnabled() == nil || u.GetEnabled().GetValue()
	}
	var err error
	if cfg.RequestID, err = compileRequestID(h); err != nil {
		return err
	}
	if cfg.Tracing, err = compileTracing(h); err != nil {
		return err
	}
	return nil
}
