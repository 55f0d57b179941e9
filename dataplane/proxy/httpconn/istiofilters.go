package httpconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	grpcstatsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	"google.golang.org/protobuf/types/known/anypb"
	alpnv2 "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/fraction"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// Names of the HTTP filters Istio adds to every HCM besides fault and RBAC.
const (
	ALPNFilterName      = "istio.alpn"
	GRPCStatsFilterName = "envoy.filters.http.grpc_stats"
	CORSFilterName      = "envoy.filters.http.cors"
)

const (
	alpnConfigType      = "istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig"
	grpcStatsConfigType = "envoy.extensions.filters.http.grpc_stats.v3.FilterConfig"
	corsConfigType      = "envoy.extensions.filters.http.cors.v3.Cors"
	corsPolicyType      = "envoy.extensions.filters.http.cors.v3.CorsPolicy"
)

var istioFiltersAllow = fieldcheck.Allow{
	"istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig":              {"alpn_override"},
	"istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig.AlpnOverride": {"upstream_protocol", "alpn_override"},
	// emit_filter_state only publishes the message counts to other filters and access
	// loggers through filter state; no access log operator here reads filter state, so
	// it has no observable effect. Per-method stats (stats_for_all_methods true or an
	// allow list) are refused: the stats are kept per cluster only.
	"envoy.extensions.filters.http.grpc_stats.v3.FilterConfig": {"emit_filter_state", "stats_for_all_methods"},
	"envoy.extensions.filters.http.cors.v3.Cors":               {},
	"envoy.extensions.filters.http.cors.v3.CorsPolicy": {"allow_origin_string_match", "allow_methods", "allow_headers",
		"expose_headers", "max_age", "allow_credentials", "filter_enabled", "forward_not_matching_preflights"},
	"envoy.config.core.v3.RuntimeFractionalPercent": {"default_value", "runtime_key"},
}.Merge(matchAllow)

// ALPNOverride is istio-proxy's istio.alpn filter: the ALPN a TLS upstream connection
// offers, chosen by the protocol the request goes upstream with (Envoy's
// upstreamHttpProtocol), unless the cluster's istio metadata says alpn_override "false".
type ALPNOverride struct {
	HTTP10, HTTP11, HTTP2 *tlsctx.ALPN
}

// GRPCStats is the grpc_stats filter with per-cluster stats: a gRPC request counts as
// cluster.<stat>.grpc.success or grpc.failure (by grpc-status) and grpc.total.
type GRPCStats struct{}

// compileIstioFilter compiles istio.alpn, grpc_stats or cors into cfg; it reports
// whether tc was one of them.
func (cfg *Config) compileIstioFilter(tc *anypb.Any) (bool, error) {
	if handled, err := cfg.compileTelemetryFilter(tc); handled || err != nil {
		return true, err
	}
	switch tc.MessageName() {
	case alpnConfigType:
		var c alpnv2.FilterConfig
		if err := tc.UnmarshalTo(&c); err != nil {
			return true, fmt.Errorf("typed_config: %w", err)
		}
		if err := istioFiltersAllow.Check(&c); err != nil {
			return true, fmt.Errorf("typed_config.%w", err)
		}
		o := &ALPNOverride{}
		for i, a := range c.GetAlpnOverride() {
			switch a.GetUpstreamProtocol() {
			case alpnv2.FilterConfig_HTTP10:
				o.HTTP10 = tlsctx.NewALPN(a.GetAlpnOverride())
			case alpnv2.FilterConfig_HTTP11:
				o.HTTP11 = tlsctx.NewALPN(a.GetAlpnOverride())
			case alpnv2.FilterConfig_HTTP2:
				o.HTTP2 = tlsctx.NewALPN(a.GetAlpnOverride())
			default:
				return true, fmt.Errorf("typed_config.alpn_override[%d].upstream_protocol: unknown protocol %s", i, a.GetUpstreamProtocol())
			}
		}
		cfg.ALPN = o
	case grpcStatsConfigType:
		var c grpcstatsv3.FilterConfig
		if err := tc.UnmarshalTo(&c); err != nil {
			return true, fmt.Errorf("typed_config: %w", err)
		}
		if err := istioFiltersAllow.Check(&c); err != nil {
			return true, fmt.Errorf("typed_config.%w", err)
		}
		if c.GetStatsForAllMethods().GetValue() {
			return true, errors.New("typed_config.stats_for_all_methods: only false is supported by meshlab proxy (no per-method stats)")
		}
		cfg.GRPCStats = &GRPCStats{}
	case corsConfigType:
		var c corsv3.Cors
		if err := tc.UnmarshalTo(&c); err != nil {
			return true, fmt.Errorf("typed_config: %w", err)
		}
		if err := istioFiltersAllow.Check(&c); err != nil {
			return true, fmt.Errorf("typed_config.%w", err)
		}
		cfg.CORS = true
	default:
		return false, nil
	}
	return true, nil
}

// alpnFor returns the ALPN override for a request of downstream protocol major.minor
// routed to cl, nil for none.
func (o *ALPNOverride) alpnFor(cl *cluster.Cluster, major, minor int) *tlsctx.ALPN {
	if cl.Config().Proto.GetMetadata().GetFilterMetadata()["istio"].GetFields()["alpn_override"].GetStringValue() == "false" {
		return nil
	}
	switch {
	case cl.UpstreamHTTP2(major):
		return o.HTTP2
	case cl.Config().DownstreamHTTP2 && major == 1 && minor == 0:
		return o.HTTP10 // use_downstream_protocol_config keeps HTTP/1.0
	}
	return o.HTTP11
}

// chargeGRPC counts a finished gRPC request in the cluster's grpc.* stats, as Envoy's
// grpc_stats filter without per-method stats: success when grpc-status (trailers, or
// headers for a trailers-only response) is 0; a response without grpc-status is not
// counted.
func chargeGRPC(scope stats.Scope, h http.Header) {
	v := h.Get(http.TrailerPrefix + "Grpc-Status")
	if v == "" {
		v = h.Get("Grpc-Status")
	}
	if v == "" {
		return // Envoy charges nothing for a response without grpc-status
	}
	if n, err := strconv.Atoi(v); err == nil && n == 0 {
		scope.Counter("grpc.success").Inc()
	} else {
		scope.Counter("grpc.failure").Inc()
	}
	scope.Counter("grpc.total").Inc()
}

// CORSPolicy is a compiled envoy.extensions.filters.http.cors.v3.CorsPolicy.
type CORSPolicy struct {
	origins          []*stringMatcher
	allowMethods     string
	allowHeaders     string
	exposeHeaders    string
	maxAge           string
	allowCredentials bool
	enabled          *fraction.Fraction // nil: always
	forwardUnmatched bool               // forward_not_matching_preflights (default true)
}

func compileCORSPolicy(a *anypb.Any) (*CORSPolicy, error) {
	var p corsv3.CorsPolicy
	if err := a.UnmarshalTo(&p); err != nil {
		return nil, err
	}
	if err := p.ValidateAll(); err != nil {
		return nil, err
	}
	if err := istioFiltersAllow.Check(&p); err != nil {
		return nil, err
	}
	out := &CORSPolicy{allowMethods: p.GetAllowMethods(), allowHeaders: p.GetAllowHeaders(), exposeHeaders: p.GetExposeHeaders(),
		maxAge: p.GetMaxAge(), allowCredentials: p.GetAllowCredentials().GetValue(), forwardUnmatched: true}
	if v := p.GetForwardNotMatchingPreflights(); v != nil {
		out.forwardUnmatched = v.GetValue()
	}
	if fe := p.GetFilterEnabled(); fe != nil {
		out.enabled = runtimeFraction(fe)
	}
	for i, m := range p.GetAllowOriginStringMatch() {
		sm, err := compileStringMatcher(m)
		if err != nil {
			return nil, fmt.Errorf("allow_origin_string_match[%d]: %w", i, err)
		}
		out.origins = append(out.origins, sm)
	}
	return out, nil
}

func (p *CORSPolicy) allows(origin string) bool {
	for _, m := range p.origins {
		if m.match(origin) {
			return true
		}
	}
	return false
}

// applyCORS is Envoy's CORS filter on the request path: a preflight from an allowed
// origin is answered here with the policy's headers; a preflight from another origin is
// forwarded (or answered bare without forward_not_matching_preflights). It reports
// whether the request was answered; for other requests it remembers the origin so that
// the response gets access-control-allow-origin (see corsResponse).
func (rt *router) applyCORS(x *exchange) (int, bool) {
	p := x.route.CORS
	if p == nil || (p.enabled != nil && !p.enabled.Sample()) {
		return 0, false
	}
	r := x.r
	origin := r.Header.Get("Origin")
	if origin == "" {
		return 0, false
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !p.allows(origin) {
		if preflight && !p.forwardUnmatched {
			x.info.CodeDetails = "cors_response"
			return rt.localReply(x, http.StatusOK, ""), true
		}
		return 0, false
	}
	if !preflight {
		x.corsOrigin = origin
		return 0, false
	}
	h := x.w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	if p.allowCredentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if p.allowMethods != "" {
		h.Set("Access-Control-Allow-Methods", p.allowMethods)
	}
	if p.allowHeaders != "" {
		h.Set("Access-Control-Allow-Headers", p.allowHeaders)
	}
	if p.maxAge != "" {
		h.Set("Access-Control-Max-Age", p.maxAge)
	}
	x.info.CodeDetails = "cors_response"
	return rt.localReply(x, http.StatusOK, ""), true
}

// corsResponse adds the CORS response headers of an allowed simple request.
func (x *exchange) corsResponse(h http.Header) {
	p := x.route.CORS
	h.Set("Access-Control-Allow-Origin", x.corsOrigin)
	if p.allowCredentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if p.exposeHeaders != "" {
		h.Set("Access-Control-Expose-Headers", p.exposeHeaders)
	}
}

// isCORSPolicy reports whether a per-filter config is a CORS policy.
func isCORSPolicy(a *anypb.Any) bool { return a.MessageName() == corsPolicyType }

// grpcFrames counts gRPC messages (length-prefixed frames: a flag byte and a 4-byte
// big-endian length) in a byte stream, as Envoy's grpc_stats filter does for
// grpc.request_message_count and grpc.response_message_count.
type grpcFrames struct {
	io.ReadCloser
	hdr     [5]byte
	hdrLen  int
	left    uint32 // payload bytes of the current message still to come
	counter *stats.Stat
}

func (f *grpcFrames) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	f.scan(p[:n])
	return n, err
}

func (f *grpcFrames) scan(b []byte) {
	for len(b) > 0 {
		if f.left > 0 {
			k := min(uint32(len(b)), f.left)
			f.left -= k
			b = b[k:]
			continue
		}
		k := copy(f.hdr[f.hdrLen:], b)
		f.hdrLen += k
		b = b[k:]
		if f.hdrLen == len(f.hdr) {
			f.counter.Inc()
			f.left = binary.BigEndian.Uint32(f.hdr[1:])
			f.hdrLen = 0
		}
	}
}
