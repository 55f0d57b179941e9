package httpconn

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
)

// The spans of a request, as Envoy's HCM and router make them with a tracing provider:
// the HCM's span starts once the request's headers are mutated (the trace decision is
// in x-request-id), takes the route's decorator operation as its name, is written into
// the upstream request as B3 headers and ends with the response, tagged as
// HttpTracerUtility::finalizeDownstreamSpan tags it. Its kind is the listener's
// traffic direction: SERVER inbound, CLIENT otherwise (Istio's sidecar outbound and
// gateway listeners are OUTBOUND; Envoy makes an UNSPECIFIED one's span SERVER, which
// this proxy does not tell apart). With spawn_upstream_span the router makes a CLIENT
// child span per request it sends upstream and propagates that one instead.

// customTag is one of the HCM's custom_tags.
type customTag struct {
	name string
	// literal is the value of a literal or environment tag (read when compiled).
	literal string
	isConst bool
	// header is a request_header tag's header; def its default_value.
	header, def string
	// metaKey and metaPath are a request metadata tag's filter name and path.
	metaKey  string
	metaPath []string
}

func compileCustomTag(ct *tracingv3.CustomTag) (customTag, error) {
	t := customTag{name: ct.GetTag()}
	if t.name == "" {
		return t, errors.New("tag: must not be empty")
	}
	switch v := ct.GetType().(type) {
	case *tracingv3.CustomTag_Literal_:
		t.literal, t.isConst = v.Literal.GetValue(), true
	case *tracingv3.CustomTag_Environment_:
		t.literal, t.isConst = os.Getenv(v.Environment.GetName()), true
		if t.literal == "" {
			t.literal = v.Environment.GetDefaultValue()
		}
	case *tracingv3.CustomTag_RequestHeader:
		t.header, t.def = v.RequestHeader.GetName(), v.RequestHeader.GetDefaultValue()
	case *tracingv3.CustomTag_Metadata_:
		if v.Metadata.GetKind().GetRequest() == nil {
			return t, errors.New("metadata.kind: only request metadata is supported by meshlab proxy")
		}
		t.metaKey, t.def = v.Metadata.GetMetadataKey().GetKey(), v.Metadata.GetDefaultValue()
		for _, seg := range v.Metadata.GetMetadataKey().GetPath() {
			t.metaPath = append(t.metaPath, seg.GetKey())
		}
	case *tracingv3.CustomTag_Value:
		return t, errors.New("value: a substitution format tag is not supported by meshlab proxy (literal, environment, request_header and metadata are)")
	default:
		return t, fmt.Errorf("type: %T is not supported by meshlab proxy (literal, environment, request_header and metadata are)", v)
	}
	return t, nil
}

// provider is the tracer of the HCM's spans: its tracing block's provider, else the
// bootstrap's tracer (Envoy's bootstrap tracing.http, which pilot-agent writes from
// defaultConfig.tracing.zipkin for istiod's legacy MeshConfig tracing), nil for none.
func (rt *router) provider() tracing.Provider {
	if p := rt.cfg.Tracing.Provider; p != nil {
		return p
	}
	if z := rt.deps.Tracer.Default(); z != nil {
		return z
	}
	return nil
}

// startSpan begins the request's span when the HCM has a tracer.
func (rt *router) startSpan(x *exchange) {
	t := rt.cfg.Tracing
	if t == nil {
		return
	}
	p := rt.provider()
	if p == nil {
		return
	}
	kind := p.SpanKind(rt.ds.Inbound, t.SpawnUpstream)
	// Envoy's default operation ("ingress", "egress <host>") until the route's
	// decorator names it.
	name := "ingress"
	if !rt.ds.Inbound {
		name = "egress " + x.r.Host
	}
	x.span = p.Start(x.r.Header, kind, name, x.traced, x.start)
}

// decorateRequest is what the HCM's tracing does to a routed request: an egress one
// carries the route's decorator operation to the upstream in x-envoy-decorator-operation
// (unless propagate is false), for the receiving proxy's server span, as Envoy's
// traceRequest; with a provider the span is named and its context injected.
func (rt *router) decorateRequest(x *exchange, cl *cluster.Cluster) {
	if r := x.route; r != nil && !rt.ds.Inbound && r.Operation != "" && !r.NoPropagate {
		x.r.Header.Set(headerDecoratorOperation, r.Operation)
	}
	if x.span != nil {
		rt.injectSpan(x, cl)
	}
}

// headerDecoratorOperation carries a decorator's operation between proxies.
const headerDecoratorOperation = "X-Envoy-Decorator-Operation"

// decorateResponse is the tracing's part of an upstream response's headers, as Envoy's
// encodeHeaders: an ingress response tells the client the route's decorator operation;
// an egress response's x-envoy-decorator-operation (the server's) names the client span
// and goes no further.
func (rt *router) decorateResponse(x *exchange, h http.Header) {
	if rt.ds.Inbound {
		if r := x.route; r != nil && r.Operation != "" && !r.NoPropagate {
			h[headerDecoratorOperation] = []string{r.Operation}
		}
		return
	}
	if op := h.Get(headerDecoratorOperation); op != "" || len(h[headerDecoratorOperation]) > 0 {
		if op != "" && x.span != nil {
			x.span.Name, x.spanNamed = op, true
		}
		delete(h, headerDecoratorOperation)
	}
}

// injectSpan names the span after the route's decorator and writes the trace context
// into the request the router sends upstream (a child span's with spawn_upstream_span).
func (rt *router) injectSpan(x *exchange, cl *cluster.Cluster) {
	if x.route != nil && x.route.Operation != "" {
		x.span.Name = x.route.Operation
	}
	if rt.cfg.Tracing.SpawnUpstream {
		x.upSpan = x.span.Child(tracing.KindClient, "router "+cl.Config().StatName+" egress", time.Now())
		x.upSpan.Inject(x.r.Header)
		return
	}
	x.span.Inject(x.r.Header)
}

// finishSpan tags and reports the request's spans.
func (rt *router) finishSpan(x *exchange, code int) {
	s := x.span
	if s == nil {
		return
	}
	if x.route != nil && x.route.Operation != "" && !x.spanNamed {
		s.Name = x.route.Operation
	}
	now := time.Now()
	if !s.Sampled {
		return
	}
	t, r := rt.cfg.Tracing, x.r
	node := tracing.Node{}
	if rt.deps.Tracer != nil {
		node = rt.deps.Tracer.Node()
	}
	s.SetTag("node_id", node.ID)
	s.SetTag("zone", node.Zone)
	if rid := r.Header.Get("X-Request-Id"); rid != "" {
		s.SetTag("guid:x-request-id", rid)
	}
	scheme := r.Header.Get("X-Forwarded-Proto")
	if scheme == "" {
		scheme = protoHTTP[0]
	}
	url := scheme + "://" + r.Host + requestPath(r)
	if t.MaxPathTagLength > 0 && len(url) > t.MaxPathTagLength {
		url = url[:t.MaxPathTagLength]
	}
	s.SetTag("http.url", url)
	s.SetTag("http.method", r.Method)
	s.SetTag("downstream_cluster", valueOr(r.Header.Get("X-Envoy-Downstream-Service-Cluster"), "-"))
	s.SetTag("user_agent", valueOr(r.Header.Get("User-Agent"), "-"))
	proto := r.Proto
	if r.ProtoMajor == 2 {
		proto = "HTTP/2"
	}
	s.SetTag("http.protocol", proto)
	peer := rt.ds.Remote
	if !peer.IsValid() {
		peer, _ = netip.ParseAddrPort(r.RemoteAddr)
	}
	s.SetTag("peer.address", peer.Addr().Unmap().String())
	if x.rx != nil {
		s.SetTag("request_size", strconv.FormatInt(x.rx.n, 10))
	} else {
		s.SetTag("request_size", "0")
	}
	s.SetTag("response_size", strconv.FormatInt(x.w.n, 10))
	s.SetTag("component", "proxy")
	if c := x.info.UpstreamCluster; c != "" {
		s.SetTag("upstream_cluster", c)
		s.SetTag("upstream_cluster.name", c)
		if cl, ok := rt.deps.Clusters.Get(c); ok {
			s.SetTag("upstream_cluster.name", cl.Config().StatName)
		}
	}
	if x.upHost.Addr.IsValid() {
		s.SetTag("upstream_address", x.upHost.Addr.String())
	}
	s.SetTag("http.status_code", strconv.Itoa(code))
	flags := x.info.Flags.String()
	s.SetTag("response_flags", valueOr(flags, "-"))
	if code == 0 || code >= 500 {
		s.SetTag("error", "true")
	}
	for _, ct := range t.Tags {
		if v, ok := ct.value(x); ok {
			s.SetTag(ct.name, v)
		}
	}
	if u := x.upSpan; u != nil {
		// The router's span gets the common tags too (setCommonTags: node, zone,
		// upstream cluster, status, flags, custom tags).
		for _, k := range []string{"component", "node_id", "zone", "response_flags"} {
			u.SetTag(k, s.Tags[k])
		}
		for _, ct := range t.Tags {
			if v, ok := ct.value(x); ok {
				u.SetTag(ct.name, v)
			}
		}
		u.SetTag("upstream_cluster", s.Tags["upstream_cluster"])
		u.SetTag("upstream_cluster.name", s.Tags["upstream_cluster.name"])
		if a, ok := s.Tags["upstream_address"]; ok {
			u.SetTag("upstream_address", a)
			u.SetTag("peer.address", a)
		}
		u.SetTag("http.protocol", proto)
		u.SetTag("http.status_code", strconv.Itoa(code))
		if code == 0 || code >= 500 {
			u.SetTag("error", "true")
		}
		u.Finish(now)
		if rt.deps.Tracer != nil {
			rt.deps.Tracer.Report(rt.provider(), u)
		}
	}
	s.Finish(now)
	if rt.deps.Tracer != nil {
		rt.deps.Tracer.Report(rt.provider(), s)
	}
}

// value is the tag's value for the request, false when it has none (a metadata tag
// whose metadata is absent and that has no default).
func (ct *customTag) value(x *exchange) (string, bool) {
	switch {
	case ct.isConst:
		return ct.literal, true
	case ct.header != "":
		if v := x.r.Header.Get(ct.header); v != "" {
			return v, true
		}
		return ct.def, ct.def != ""
	case ct.metaKey != "":
		st := x.meta[ct.metaKey]
		if st == nil || len(ct.metaPath) == 0 {
			return ct.def, ct.def != ""
		}
		v := st.GetFields()[ct.metaPath[0]]
		for _, seg := range ct.metaPath[1:] {
			v = v.GetStructValue().GetFields()[seg]
		}
		if s := v.GetStringValue(); s != "" {
			return s, true
		}
		return ct.def, ct.def != ""
	}
	return "", false
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
