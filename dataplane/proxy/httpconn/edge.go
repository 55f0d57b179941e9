package httpconn

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
)

// RequestID is the HCM's x-request-id handling: request_id_extension (only Envoy's UUID
// extension exists), preserve_external_request_id and tracing's trace-reason packing.
type RequestID struct {
	// PackTraceReason is UuidRequestIdConfig.pack_trace_reason (default true): the trace
	// decision is written into the UUID's version nibble, as Envoy does.
	PackTraceReason bool
	// PreserveExternal keeps the x-request-id of an edge request (use_remote_address and
	// an external client); otherwise Envoy replaces it.
	PreserveExternal bool
	// NoGenerate is generate_request_id false: no x-request-id is set or replaced, and
	// no trace reason is packed.
	NoGenerate bool
}

// Tracing is the HCM's tracing block. Envoy takes the trace decision and packs it into
// x-request-id, which the next hop and the access log see; with a provider (Zipkin or
// OpenTelemetry, the tracers meshlab proxy has) it also makes a span of every request
// and reports the sampled ones (trace.go).
type Tracing struct {
	// Percentages in hundredths of a percent (0..10000): Envoy's defaults are 100 %
	// client, 100 % random and 100 % overall sampling.
	Client, Random, Overall uint64
	// Provider is the tracer, nil for none (no span is made).
	Provider tracing.Provider
	// SpawnUpstream is spawn_upstream_span: the router makes a child span of each
	// upstream request (Istio sets it on gateways).
	SpawnUpstream bool
	// MaxPathTagLength bounds the http.url tag (Envoy's default 256).
	MaxPathTagLength int
	// Tags are custom_tags, in order.
	Tags []customTag
}

var requestIDAllow = fieldcheck.Allow{
	"envoy.extensions.filters.network.http_connection_manager.v3.RequestIDExtension": {"typed_config"},
	"envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig":                        {"pack_trace_reason", "use_request_id_for_trace_sampling"},
}

// tracingAllow accepts the sampling knobs, the span decorations and a provider, whose
// typed_config compileTracing reads (only envoy.tracers.zipkin; others refused by name).
// verbose (a span annotation per filter event) changes no span the collector keeps here:
// the proxy's spans carry no annotations.
var tracingAllow = fieldcheck.Allow{
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.Tracing": {
		"client_sampling", "random_sampling", "overall_sampling", "verbose", "max_path_tag_length", "custom_tags", "spawn_upstream_span", "provider",
	},
	"envoy.config.trace.v3.Tracing.Http":             {"name", "typed_config"},
	"envoy.type.tracing.v3.CustomTag":                {"tag", "literal", "environment", "request_header", "metadata", "value"},
	"envoy.type.tracing.v3.CustomTag.Literal":        {"value"},
	"envoy.type.tracing.v3.CustomTag.Environment":    {"name", "default_value"},
	"envoy.type.tracing.v3.CustomTag.Header":         {"name", "default_value"},
	"envoy.type.tracing.v3.CustomTag.Metadata":       {"kind", "metadata_key", "default_value"},
	"envoy.type.metadata.v3.MetadataKind":            {"request"},
	"envoy.type.metadata.v3.MetadataKey":             {"key", "path"},
	"envoy.type.metadata.v3.MetadataKey.PathSegment": {"key"},
}

const uuidConfigType = "envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig"

func compileRequestID(h *hcmv3.HttpConnectionManager) (RequestID, error) {
	rid := RequestID{PackTraceReason: true, PreserveExternal: h.GetPreserveExternalRequestId(),
		NoGenerate: h.GetGenerateRequestId() != nil && !h.GetGenerateRequestId().GetValue()}
	ext := h.GetRequestIdExtension()
	if ext == nil {
		return rid, nil
	}
	if err := requestIDAllow.Check(ext); err != nil {
		return rid, fmt.Errorf("request_id_extension.%w", err)
	}
	tc := ext.GetTypedConfig()
	if tc == nil {
		return rid, nil
	}
	if tc.MessageName() != uuidConfigType {
		return rid, fmt.Errorf("request_id_extension.typed_config: unsupported type %s", tc.MessageName())
	}
	var u uuidv3.UuidRequestIdConfig
	if err := tc.UnmarshalTo(&u); err != nil {
		return rid, fmt.Errorf("request_id_extension.typed_config: %w", err)
	}
	if err := requestIDAllow.Check(&u); err != nil {
		return rid, fmt.Errorf("request_id_extension.typed_config.%w", err)
	}
	if v := u.GetPackTraceReason(); v != nil {
		rid.PackTraceReason = v.GetValue()
	}
	// use_request_id_for_trace_sampling=false draws the random sampling decision from a
	// random number instead of the request id: with a fresh random UUID per request the
	// two are the same distribution, and an incoming id decides the same way at every
	// hop only when it is true, which Istio sets.
	if v := u.GetUseRequestIdForTraceSampling(); v != nil && !v.GetValue() {
		return rid, errors.New("request_id_extension.typed_config.use_request_id_for_trace_sampling: only true is supported by meshlab proxy")
	}
	return rid, nil
}

func compileTracing(h *hcmv3.HttpConnectionManager) (*Tracing, error) {
	t := h.GetTracing()
	if t == nil {
		return nil, nil
	}
	if err := tracingAllow.Check(t); err != nil {
		return nil, fmt.Errorf("tracing.%w", err)
	}
	pct := func(p interface{ GetValue() float64 }, def uint64) uint64 {
		if p == nil {
			return def
		}
		return uint64(p.GetValue()*100 + 0.5)
	}
	out := &Tracing{Client: 10000, Random: 10000, Overall: 10000, MaxPathTagLength: 256}
	if t.GetClientSampling() != nil {
		out.Client = pct(t.GetClientSampling(), 10000)
	}
	if t.GetRandomSampling() != nil {
		out.Random = pct(t.GetRandomSampling(), 10000)
	}
	if t.GetOverallSampling() != nil {
		out.Overall = pct(t.GetOverallSampling(), 10000)
	}
	if v := t.GetMaxPathTagLength(); v != nil {
		out.MaxPathTagLength = int(v.GetValue())
	}
	out.SpawnUpstream = t.GetSpawnUpstreamSpan().GetValue()
	for i, ct := range t.GetCustomTags() {
		if _, ok := ct.GetType().(*tracingv3.CustomTag_Value); ok && t.GetProvider() == nil {
			// istiod's waypoints tag spans with substitution formats
			// (%FILTER_STATE(upstream_peer_obj:FIELD:app)%); without a provider only the
			// bootstrap's tracer (tracing.http) makes spans, and those go without these
			// tags here. With a provider the tag is refused by compileCustomTag.
			continue
		}
		tag, err := compileCustomTag(ct)
		if err != nil {
			return nil, fmt.Errorf("tracing.custom_tags[%d].%w", i, err)
		}
		out.Tags = append(out.Tags, tag)
	}
	if p := t.GetProvider(); p != nil {
		var err error
		switch p.GetName() {
		case tracing.ZipkinName:
			out.Provider, err = tracing.CompileZipkin(p.GetTypedConfig())
		case tracing.OTelName:
			out.Provider, err = tracing.CompileOTel(p.GetTypedConfig())
		default:
			return nil, fmt.Errorf("tracing.provider.name: %q is not a tracer of meshlab proxy (it has %s and %s: a zipkin or opentelemetry provider in meshConfig.extensionProviders)", p.GetName(), tracing.ZipkinName, tracing.OTelName)
		}
		if err != nil {
			return nil, fmt.Errorf("tracing.provider.%w", err)
		}
	}
	return out, nil
}

// Trace reasons Envoy's UUID extension packs at index 14 of x-request-id (the version
// nibble).
const (
	traceNone    = '4'
	traceSampled = '9'
	traceForced  = 'a'
	traceClient  = 'b'
)

// Internal request headers Envoy removes from requests that are not internal (every
// request here: Envoy's default internal_address_config lists no address), and the ones
// it also removes from edge requests (use_remote_address), in Envoy's
// ConnectionManagerUtility::cleanInternalHeaders.
var (
	internalOnlyHeaders = []string{"X-Envoy-Internal", "X-Envoy-Downstream-Service-Cluster", "X-Envoy-Downstream-Service-Node", "X-Envoy-Decorator-Operation"}
	edgeHeaders         = []string{
		"X-Envoy-External-Address", "X-Envoy-Retry-On", "X-Envoy-Retry-Grpc-On", "X-Envoy-Max-Retries",
		"X-Envoy-Upstream-Alt-Stat-Name", "X-Envoy-Upstream-Rq-Timeout-Ms", "X-Envoy-Upstream-Rq-Per-Try-Timeout-Ms",
		"X-Envoy-Upstream-Rq-Timeout-Alt-Response", "X-Envoy-Expected-Rq-Timeout-Ms", "X-Envoy-Force-Trace",
		"X-Envoy-Ip-Tags", "X-Envoy-Original-Url", "X-Envoy-Hedge-On-Per-Try-Timeout",
	}
)

// mutateRequestHeaders is Envoy's ConnectionManagerUtility::mutateRequestHeaders for what
// the proxy implements: x-forwarded-for and x-envoy-external-address under
// use_remote_address, the cleaning of internal headers, x-forwarded-proto, x-request-id
// and its trace reason.
func (rt *router) mutateRequestHeaders(x *exchange) {
	r := x.r
	cfg, h := rt.cfg, r.Header
	edge := false
	if cfg.UseRemoteAddress {
		remote := rt.ds.Remote
		if !remote.IsValid() {
			remote, _ = netip.ParseAddrPort(r.RemoteAddr)
		}
		if remote.IsValid() {
			ip := remote.Addr()
			if ip.IsLoopback() {
				ip = localAddress() // Envoy appends its own address for a loopback peer
			}
			appendXFF(h, ip.Unmap().String())
			edge = true // no address is internal under Envoy's default internal_address_config
		}
		// The prior hop is not trusted (xff_num_trusted_hops 0): x-forwarded-proto is
		// this connection's.
		proto := protoHTTP
		if r.TLS != nil {
			proto = protoHTTPS
		}
		h["X-Forwarded-Proto"] = proto
	} else {
		x.remote = lastXFF(h)
	}
	if !cfg.UseRemoteAddress && h.Get("X-Forwarded-Proto") == "" {
		proto := protoHTTP
		if r.TLS != nil {
			proto = protoHTTPS
		}
		h["X-Forwarded-Proto"] = proto
	}
	for _, k := range internalOnlyHeaders {
		if _, ok := h[k]; ok {
			h.Del(k)
		}
	}
	if edge {
		for _, k := range edgeHeaders {
			if _, ok := h[k]; ok {
				h.Del(k)
			}
		}
		h.Set("X-Envoy-External-Address", rt.edgeAddress(r))
	}
	if cfg.RequestID.NoGenerate {
		return
	}
	rid := h.Get("X-Request-Id")
	if rid == "" || (edge && !cfg.RequestID.PreserveExternal) {
		rid = newUUID()
		h.Set("X-Request-Id", rid)
	}
	if t := cfg.Tracing; t != nil {
		if packed, ok := t.packTraceReason(rid, h); ok {
			switch packed[14] {
			case traceSampled, traceForced, traceClient:
				x.traced = true
			}
			if cfg.RequestID.PackTraceReason && packed != rid {
				h.Set("X-Request-Id", packed)
			}
		}
	}
}

// edgeAddress is the remote address of an edge request, as in x-envoy-external-address.
func (rt *router) edgeAddress(r *http.Request) string {
	remote := rt.ds.Remote
	if !remote.IsValid() {
		remote, _ = netip.ParseAddrPort(r.RemoteAddr)
	}
	return remote.Addr().Unmap().String()
}

func appendXFF(h http.Header, ip string) {
	if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
		h.Set("X-Forwarded-For", strings.Join(prior, ",")+","+ip)
		return
	}
	h.Set("X-Forwarded-For", ip)
}

// packTraceReason returns rid with Envoy's trace decision packed (mutateTracingRequestHeader):
// a client-requested trace (x-client-trace-id) under client sampling, a forced one
// (x-envoy-force-trace), or random sampling on the id's first 8 hex digits mod 10000;
// outside overall sampling the request is not traced. ok is false for an id that is not a
// UUID, which Envoy leaves alone.
func (t *Tracing) packTraceReason(rid string, h http.Header) (string, bool) {
	if len(rid) != 36 || rid[8] != '-' || rid[13] != '-' || rid[18] != '-' || rid[23] != '-' {
		return rid, false
	}
	n, err := strconv.ParseUint(rid[:8], 16, 64)
	if err != nil {
		return rid, false
	}
	v := n % 10000
	reason := byte(0)
	switch {
	case h.Get("X-Client-Trace-Id") != "" && v < t.Client:
		reason = traceClient
	case h.Get("X-Envoy-Force-Trace") != "":
		reason = traceForced
	case v < t.Random:
		reason = traceSampled
	}
	if v >= t.Overall {
		reason = traceNone
	}
	if reason == 0 || rid[14] == reason {
		return rid, true
	}
	b := []byte(rid)
	b[14] = reason
	return string(b), true
}

// lastXFF is the client address Envoy trusts without use_remote_address
// (xff_num_trusted_hops 0): the last x-forwarded-for entry, with port 0; invalid when the
// header is absent or its last entry is not an IP address.
func lastXFF(h http.Header) netip.AddrPort {
	vs := h.Values("X-Forwarded-For")
	if len(vs) == 0 {
		return netip.AddrPort{}
	}
	last := vs[len(vs)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	ip, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip.Unmap(), 0)
}

// LocalAddress is Envoy's LocalInfo address: the proxy's spans carry it as their
// local endpoint's.
func LocalAddress() netip.Addr { return localAddress() }

// localAddress is Envoy's LocalInfo address (Network::Utility::getLocalAddress): the
// first non-loopback IPv4 address of the proxy's network namespace (the pod IP), or
// 127.0.0.1 when there is none. Computed once.
var localAddress = sync.OnceValue(func() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if pfx, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(pfx.IP); ok {
					if ip = ip.Unmap(); ip.Is4() && !ip.IsLoopback() {
						return ip
					}
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
})
